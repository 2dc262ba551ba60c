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
#   bash scripts/gpu_pop_carry.sh --piano --chords   and carry/pop_chords.tar.gz, pop with its chord events
#                                            (the pop_chords run; packed, ~3 MB; CHORDS_DATA=... its arrays;
#                                            --chords alone packs only that, GPU_POP_CARRY=... into another folder)
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
piano() {
  # the shipped piano's own split (its model card): by piece, 5% test, so that no test piece was trained on by
  # either model and the two compare on the same validation performances
  [ -f carry/piano/train.bin ] || "$PY" -m musictx.commands.prep source=folder input_dir=../shared/data/piano \
    output_dir=carry/piano split.group_by=parent split.test=0.05 2>&1 | grep -v "tokenize:"
  mkdir -p carry/paper_init/piano_small   # the piano_small run starts from the shipped piano (3.6 MB)
  cp musictx/pretrained/piano/config.json musictx/pretrained/piano/*.safetensors carry/paper_init/piano_small/
  wheels
  du -sh carry/piano carry/paper_init/piano_small carry/wheels
}
chords() {
  # pop with its chord events, POP909's other arrangements in the train split (~1.5 min on 2 cores), packed:
  # the arrays are ~31 MB, the archive ~3 (the arrangements repeat much of their songs); gpu_pop.sh unpacks it
  # on the GPU machine
  local data=${CHORDS_DATA:-data/pop_chords_v} carry=${GPU_POP_CARRY:-carry}  # the tests point these elsewhere
  [ -f "$data/train.bin" ] || "$PY" -m musictx.commands.prep source=folder input_dir=../shared/data/pop/POP909 \
    output_dir="$data" tokenizer=remi tokenizer.chords=true pop_versions=train num_workers=${WORKERS:-2} 2>&1 \
    | grep -v "tokenize:"
  local stage
  stage=$(mktemp -d)
  mkdir "$stage/pop_chords"
  cp "$data"/tokenizer.json "$data"/manifest.json "$data"/skipped.tsv "$data"/train.* "$data"/validation.* \
    "$stage/pop_chords/"
  mkdir -p "$carry" && tar -czf "$carry/pop_chords.tar.gz" -C "$stage" pop_chords
  rm -rf "$stage" "$carry/pop_chords"  # an older unpacked copy: gpu_pop.sh would keep it over the new archive
  du -sh "$carry/pop_chords.tar.gz"
}
if [ "${1:-}" = --piano ] || [ "${1:-}" = --chords ]; then
  for flag in "$@"; do
    case $flag in
      --piano) piano ;;
      --chords) chords ;;
      *) echo "gpu_pop_carry.sh: unknown option $flag (--piano, --chords)" >&2; exit 2 ;;
    esac
  done
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
