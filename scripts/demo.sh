#!/usr/bin/env bash
# The main job on the embedded default data: Bach chorales from the music21 corpus -> tokens ->
# a small Music Transformer trained for a few minutes on CPU -> continuations of a held-out chorale.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export OMP_WAIT_POLICY=PASSIVE

echo "== 1/3 prepare the Bach chorales (music21 corpus) -> data/bach"
$BIN/musictx-prep

echo "== 2/3 train a small Music Transformer (experiment=demo, a few minutes on CPU)"
$BIN/musictx-train experiment=demo

echo "== 3/3 continue a held-out chorale (test split)"
seed_rel=$(head -n 1 data/bach/test.files.txt)
$BIN/musictx-generate checkpoint=outputs/demo/train/checkpoints/last.ckpt \
    seed_midi="data/bach_midi/$seed_rel" seed_seconds=8 length_seconds=20 num_samples=2 \
    temperature=0.95 top_p=0.95 seed=7 output_dir=outputs/demo/generate hydra.run.dir=outputs/demo/generate

echo
echo "Done. Seed: data/bach_midi/$seed_rel"
echo "Continuations (MIDI, piano-roll PNG, settings JSON) in outputs/demo/generate/:"
ls outputs/demo/generate
