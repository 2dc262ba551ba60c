#!/usr/bin/env bash
# What the pop-large GPU call (scripts/gpu_pop.sh) needs to travel, in the git-ignored carry/ (docs/gpu.md):
#   carry/pop_large/  the prepared pop arrays: POP909 001-800 with the extra arrangements in the train split
#                     (musictx-prep ... pop_versions=train), without ngram_index.npy (the scorecard's, not training's)
#   carry/wheels/     miditok, symusic and symusic's two small needs for Python 3.12 on x86-64: the GPU image lacks them
# About 35 MB; the tracked tree is about 17 MB more, under the 64 MiB a call takes. Run from the repository:
#   bash scripts/gpu_pop_carry.sh            (PYTHON=... for another interpreter; DATA=... for another arrays folder)
#   bash scripts/gpu_pop_carry.sh --piano    the paper queue's instead (docs/gpu.md): carry/piano, the piano
#                                            arrays split as the shipped piano's (~13 MB, seconds), carry/wheels
#                                            (each only where it is missing) and the shipped piano's weights as
#                                            carry/paper_init/piano_small
# carry/ is git-ignored and stays on the machine that made it: a session on a new machine makes it again.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
wheels() {
  ls carry/wheels/miditok-*.whl >/dev/null 2>&1 && return 0
  mkdir -p carry/wheels
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d carry/wheels symusic==0.6.0 miditok==3.1.0 platformdirs==4.14.8 pySmartDL==1.3.4
}
if [ "${1:-}" = --piano ]; then
  # the shipped piano's own split (its model card): by piece, 5% test, so that no test piece was trained on by
  # either model and the two compare on the same validation performances
  [ -f carry/piano/train.bin ] || "$PY" -m musictx.commands.prep source=folder input_dir=../shared/data/piano \
    output_dir=carry/piano split.group_by=parent split.test=0.05 2>&1 | grep -v "tokenize:"
  wheels
  mkdir -p carry/paper_init/piano_small   # the piano_small run starts from the shipped piano (3.6 MB)
  cp musictx/pretrained/piano/config.json musictx/pretrained/piano/*.safetensors carry/paper_init/piano_small/
  du -sh carry/piano carry/wheels carry/paper_init/piano_small
  exit 0
fi
DATA=${DATA:-data/pop_large}
if [ ! -f "$DATA/train.bin" ]; then  # ~2.5 min on one core
  "$PY" -m musictx.commands.prep source=folder input_dir=../shared/data/pop/POP909 output_dir="$DATA" \
    tokenizer=remi pop_versions=train num_workers=${WORKERS:-1}
fi
rm -rf carry/pop_large && mkdir -p carry/pop_large
cp "$DATA"/tokenizer.json "$DATA"/manifest.json "$DATA"/skipped.tsv "$DATA"/*.bin "$DATA"/*.idx.npy "$DATA"/*.files.txt \
  carry/pop_large/
wheels
du -sh carry carry/*
