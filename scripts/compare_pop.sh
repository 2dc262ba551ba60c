#!/usr/bin/env bash
# The comparisons on pop (does relative attention help there, and which tokenizer?): the Music Transformer, the
# vanilla Transformer and the LSTM on REMI tokens, and the Music Transformer on Performance events, all at
# one budget (experiment=pop_compare_*), each scored on the held-out test split: NLL per token and per
# note, and the continuation scorecard on its first 16 songs.
#   bash scripts/compare_pop.sh [arm ...]   (~6 min an arm on 2 CPU cores; THREADS=1 beside other work; needs data/pop and data/pop_performance)
set -euo pipefail
export OMP_WAIT_POLICY=PASSIVE
BIN=.venv/bin
for arm in "${@:-music_transformer transformer lstm performance}"; do
  for model in $arm; do
    dir=outputs/compare_pop/$model
    data=data/pop; [ "$model" = performance ] && data=data/pop_performance
    [ -f "$dir/train/checkpoints/last.ckpt" ] || $BIN/musictx-train experiment=pop_compare_$model threads=${THREADS:-2}
    $BIN/musictx-evaluate checkpoint=$dir/train/checkpoints/last.ckpt data.dir=$data split=test mode=nll \
        progress=false batch_size=16 stride=512 output_dir=$dir/nll
    $BIN/musictx-evaluate checkpoint=$dir/train/checkpoints/last.ckpt data.dir=$data split=test \
        mode=continuation scorecard.max_songs=16 progress=false output_dir=$dir/scorecard
  done
done
$BIN/python scripts/compare_pop_table.py
