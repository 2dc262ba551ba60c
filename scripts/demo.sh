#!/usr/bin/env bash
# The main job on the embedded default data: Bach chorales from the music21 corpus -> tokens ->
# a small Music Transformer trained for a few minutes on CPU -> continuations of a held-out chorale.
#   bash scripts/demo.sh [musictx-train overrides]     e.g. trainer.max_steps=20 for a first look
#   make demo DEMO_ARGS="trainer.max_steps=20"         the same through make
#   DEMO_CHORALES=40 bash scripts/demo.sh ...          only the first 40 chorales (a quick check)
# Rerunning it replaces the demo's own run (outputs/demo/train): it is the demo's folder, not a user's run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export OMP_WAIT_POLICY=PASSIVE

echo "== 1/3 prepare the Bach chorales (music21 corpus) -> data/bach"
$BIN/musictx-prep bach_limit="${DEMO_CHORALES:-null}"

echo "== 2/3 train a small Music Transformer (experiment=demo, a few minutes on CPU)"
$BIN/musictx-train experiment=demo overwrite=true "$@"

echo "== 3/3 continue a held-out chorale (test split)"
# files.txt holds one JSON string a line (names may hold any character): read it as the library does
seed_rel=$($BIN/python -c 'import sys; from musictx.io.token_store import read_file_names
print(read_file_names(sys.argv[1])[0])' data/bach/test.files.txt)
# quoted for Hydra: a name with '=', ',' or brackets would otherwise be parsed as override syntax
$BIN/musictx-generate checkpoint=outputs/demo/train/checkpoints/last.ckpt \
    "seed_midi='data/bach_midi/$seed_rel'" seed_seconds=8 length_seconds=20 num_samples=2 \
    temperature=0.95 top_p=0.95 seed=7 output_dir=outputs/demo/generate hydra.run.dir=outputs/demo/generate

echo
echo "Done. Seed: data/bach_midi/$seed_rel"
echo "Continuations (MIDI, WAV, piano-roll PNG, settings JSON) in outputs/demo/generate/:"
ls outputs/demo/generate
