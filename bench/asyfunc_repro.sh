#!/usr/bin/env bash
# AsyFunc reproduction (issue 17). For each zoo model: AsyFunc's Extractor +
# Profiler on the real engine (`vario perf --blocks`: layer blocks, their
# ⟨c, b, l, p, d⟩ tuples, and the load of the blocks LLS would give a shadow
# against loading the whole model), then the simulator on that block
# profile (`vario asyfunc`): AsyFunc vs AsyFunc⁻ vs BATCH under bursty
# arrivals. Prints exactly, per model:
#   model=<m> shadow_load_ms=<x> full_load_ms=<x>
#   model=<m> policy=<name> cpu_core_s=<x> mem_gb_s=<x> violations_pct=<x>   (x3)
# Block profiles, tables and per-period allocations go to $ASYFUNC_OUT
# (default out/asyfunc). Models missing from models/zoo are exported with
# tools/zoo/export_torchvision.py (python3-torch) first.
#   bench/asyfunc_repro.sh [BUILD_DIR] [MODEL ...]
#   default models: mobilenet_v2 resnet50 vgg16 alexnet
#   env CMAX: cores profiled 1..CMAX (default 2, what the development box
#   allows; the paper's C_max is 16: bench/asyfunc_device.sh runs this
#   experiment on a 16-core machine from a carried binary and models)
#   env ASYFUNC_PROFILES=DIR: no profiling; DIR/<m>.json and DIR/<m>.blocks.txt
#   are block profiles measured earlier (experiments/asyfunc/xeon16: the
#   16-core ones of docs/EXPERIMENTS.md (e)); the load line is theirs
#   env ASYFUNC_ARGS: more `vario asyfunc` options (e.g. --slo-cmax 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# paths the caller gives are relative to the caller's directory: made
# absolute before the cd to the checkout (the defaults are the checkout's)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
BUILD=$root/build
if [ $# -gt 0 ]; then BUILD=$(abs "$1"); shift; fi
MODELS=${*:-mobilenet_v2 resnet50 vgg16 alexnet}
OUT=$root/out/asyfunc
[ -n "${ASYFUNC_OUT:-}" ] && OUT=$(abs "$ASYFUNC_OUT")
[ -n "${ASYFUNC_PROFILES:-}" ] && ASYFUNC_PROFILES=$(abs "$ASYFUNC_PROFILES")
cd "$root"
mkdir -p "$OUT"
rm -f "$OUT/periods.csv"
for m in $MODELS; do
  if [ -n "${ASYFUNC_PROFILES:-}" ]; then
    prof=$ASYFUNC_PROFILES/$m.json
    [ -f "$prof" ] || { echo "asyfunc_repro: no $prof" >&2; continue; }
    grep '^model=' "$ASYFUNC_PROFILES/$m.blocks.txt"
    # shellcheck disable=SC2086
    nice -n 10 "$BUILD/vario" asyfunc "$prof" --periods-csv "$OUT/periods.csv" \
      ${ASYFUNC_ARGS:-}
    continue
  fi
  onnx=models/zoo/$m/model.onnx
  if [ ! -f "$onnx" ]; then
    nice -n 10 /usr/bin/python3 tools/zoo/export_torchvision.py "$m" >&2 ||
      { echo "asyfunc_repro: cannot export $m (python3-torch?)" >&2; continue; }
  fi
  nice -n 10 "$BUILD/vario" perf "$onnx" --blocks --name "$m" --cmax "${CMAX:-2}" \
    --output "$OUT/$m.json" \
    > "$OUT/$m.blocks.txt"
  grep '^model=' "$OUT/$m.blocks.txt"
  nice -n 10 "$BUILD/vario" asyfunc "$OUT/$m.json" --periods-csv "$OUT/periods.csv" \
    ${ASYFUNC_ARGS:-}
done
