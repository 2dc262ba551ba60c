#!/usr/bin/env bash
# The pop-large GPU call in one line (issue 51; docs/gpu.md has the device tool's call: command, carry, timeout):
#   bash scripts/gpu_pop.sh              # on the lent GPU, $OUT set by the tool: tests, kernel table, training
#   OUT=/tmp/x bash scripts/gpu_pop.sh tiny   # on CPU at a tiny size (tests/test_gpu_pop.py runs it)
# Installs the carried wheels (carry/wheels: miditok, symusic and their two small needs, which the GPU image
# lacks) into /tmp/site when they do not import, unpacks carried arrays (carry/*.tar.gz), then runs
# scripts/gpu_pop.py; more arguments go to it.
set -u
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-python3}
WHEELS=${GPU_POP_WHEELS:-carry/wheels}   # the tests point these at a CPU stand-in's wheels
SITE=${GPU_POP_SITE:-/tmp/site}
: "${OUT:?set OUT to the folder that comes back}"
mkdir -p "$OUT"
if ! "$PY" -c "import miditok, symusic" 2>/dev/null; then
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "miditok/symusic missing and no $WHEELS/*.whl" | tee -a "$OUT/gpu.log"; exit 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl 2>&1 | tail -3
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
  echo "installed $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS into $SITE" | tee -a "$OUT/gpu.log"
fi
# arrays carried packed (gpu_pop_carry.sh --chords: carry/NAME.tar.gz, a fifth of their size) are unpacked
# beside it as carry/NAME/, unless that folder is there already
CARRY=${GPU_POP_CARRY:-carry}
for packed in "$CARRY"/*.tar.gz; do
  [ -f "$packed" ] || continue
  [ -d "${packed%.tar.gz}" ] && continue
  tar -xzf "$packed" -C "$CARRY" && echo "unpacked $packed into ${packed%.tar.gz}" | tee -a "$OUT/gpu.log"
done
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
TINY=()
if [ "${1:-}" = tiny ]; then TINY=(--tiny); shift; fi
exec "$PY" scripts/gpu_pop.py --out "$OUT" "${TINY[@]}" "$@"
