#!/bin/sh
# Runs every experiment (experiments/run.sh, no plots) into a scratch
# directory and checks the headline orderings of issue 13 on its numbers
# (experiments/orderings.py on the unrounded OUT/summary.csv). Exit 0: all
# asserted orderings hold; 1: one no longer does (the table and the failed
# checks are printed); 77: no shared data (ctest reports a skip).
#
#   experiments/check.sh [VARIO] [DATA_DIR]
#     VARIO     default build-sim/vario
#     DATA_DIR  default ../shared/data beside the clone
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VARIO=${1:-$ROOT/build-sim/vario}
DATA=${2:-$ROOT/../shared/data}
if [ ! -d "$DATA/proteus" ]; then
  echo "experiments/check.sh: no Proteus data under $DATA; skipping" >&2
  exit 77
fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/vr_exp.XXXXXX")
trap 'rm -rf "$OUT"' EXIT INT TERM
VR_EXP_PLOTS=0 "$ROOT/experiments/run.sh" "$DATA" "$OUT" "$VARIO" > /dev/null
/usr/bin/python3 "$ROOT/experiments/orderings.py" "$OUT/summary.csv"
