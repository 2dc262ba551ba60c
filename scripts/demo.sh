#!/usr/bin/env bash
# The main job on the embedded default: Bach chorales from music21 -> tokens (-> train -> generate).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export OMP_WAIT_POLICY=PASSIVE

echo "== 1/3 prepare the Bach chorales (music21 corpus) -> data/bach"
$BIN/musictx-prep
