#!/usr/bin/env bash
# The three-model comparison on pop (README, "Three models on pop"): the Music Transformer, the vanilla
# Transformer and the LSTM at an equal budget (experiment=pop_compare_*), each scored on the held-out test
# split: NLL per token and per note, and the continuation scorecard on its first 16 songs.
#   bash scripts/compare_pop.sh            (~45 min on 2 CPU cores; needs data/pop, see experiment=pop)
set -euo pipefail
export OMP_WAIT_POLICY=PASSIVE
BIN=.venv/bin
for model in music_transformer transformer lstm; do
  dir=outputs/compare_pop/$model
  [ -f "$dir/train/checkpoints/last.ckpt" ] || $BIN/musictx-train experiment=pop_compare_$model threads=2
  $BIN/musictx-evaluate checkpoint=$dir/train/checkpoints/last.ckpt data.dir=data/pop split=test mode=nll \
      progress=false output_dir=$dir/nll
  $BIN/musictx-evaluate checkpoint=$dir/train/checkpoints/last.ckpt data.dir=data/pop split=test \
      mode=continuation scorecard.max_songs=16 progress=false output_dir=$dir/scorecard
done
$BIN/python scripts/compare_pop_table.py
