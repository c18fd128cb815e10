#!/usr/bin/env bash
# AsyFunc on a machine with many cores (issue 17): block profiles on 1..C_max
# cores (the paper's C_max is 16; the development box allows 2), the
# simulator experiment on them, and the live burst comparison asserted
# (--strict). Needs only bash, coreutils, gzip and python3: the binary and
# the models come as arguments (bench/asyfunc_device_pack.sh makes both).
#   bench/asyfunc_device.sh VARIO MODEL_DIR OUT_DIR
#   bench/asyfunc_device.sh --pack PACK.tar.gz OUT_DIR
#     (the tarball of bench/asyfunc_device_pack.sh, unpacked to a temporary
#     folder: VARIO = its bin/vario, MODEL_DIR = its models)
#     VARIO      the vario binary (or the pack's bin/vario wrapper)
#     MODEL_DIR  <m>/model.onnx or <m>/model.onnx.gz per model, and
#                af_cnn.onnx (the live test's CNN); without it the live
#                test generates its own (needs protoc)
#     OUT_DIR    gets summary.txt (the contract lines, as measured) and
#                asyfunc_device.tar.gz (updated after every step; the
#                device tool brings back only a few files), holding:
#                env.txt, <m>.json (block profile), <m>.blocks.txt,
#                sim.txt (the repro lines + -v details, then the same
#                profile cut to 2 cores: --cmax 2, then AsyFunc with the
#                paper's gamma: --gamma-total), periods.csv,
#                live.txt, summary.txt (the contract lines)
#   env: CMAX (16, capped at the cores present), RUNS (3 timed runs per
#        (c, b), minimum kept), MODELS (mobilenet_v2 alexnet resnet50 vgg16),
#        BUDGET_S (420: a step that would start later is skipped),
#        LIVE (1: run the live comparison), LIVE_CORES (the server's
#        cores: all present), LIVE_CMAX (the most cores a shadow may get:
#        half of LIVE_CORES, the rest left to the body, HTTP and the load
#        generator), LIVE_RUNS (1: how many times the live comparison
#        runs), LIVE_ARGS (extra for asyfunc_live.py, e.g. --seconds 2),
#        ASYFUNC_ARGS (extra for `vario asyfunc`); MODELS=none: the live
#        comparison only
set -uo pipefail
[ $# -eq 3 ] || { sed -n 2,25p "$0" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
if [ "$1" = --pack ]; then
  tar -C "$TMPD" -xzf "$2" || exit 1
  d=$(ls -d "$TMPD"/*/ | head -1)
  VARIO=${d}bin/vario
  MODEL_DIR=${d}models
else
  VARIO=$(readlink -f "$1")
  MODEL_DIR=$(readlink -f "$2")
fi
OUT=$3
mkdir -p "$OUT"
DEST=$(readlink -f "$OUT")
OUT=$TMPD/asyfunc_device
mkdir -p "$OUT"
# copies what is measured so far to DEST (a timeout keeps the last copy)
save() {
  cp "$OUT/summary.txt" "$DEST/summary.txt" 2>/dev/null
  tar -C "$TMPD" -czf "$DEST/asyfunc_device.tar.gz.part" asyfunc_device &&
    mv "$DEST/asyfunc_device.tar.gz.part" "$DEST/asyfunc_device.tar.gz"
}
T0=$(date +%s)
NCPU=$(nproc)
CMAX=${CMAX:-16}
[ "$CMAX" -gt "$NCPU" ] && CMAX=$NCPU
RUNS=${RUNS:-3}
MODELS=${MODELS:-mobilenet_v2 alexnet resnet50 vgg16}
BUDGET_S=${BUDGET_S:-420}
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { [ "$(elapsed)" -lt "$BUDGET_S" ]; }
log() { echo "# [$(elapsed) s] $*" | tee -a "$OUT/summary.txt" >&2; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "cores: $NCPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
  echo "memory: $(grep MemTotal /proc/meminfo)"
  echo "cmax: $CMAX runs: $RUNS models: $MODELS"
  echo "vario: $("$VARIO" version 2>&1 | head -1)"
  echo "python3: $(python3 --version 2>&1)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt" >&2
: > "$OUT/summary.txt"
: > "$OUT/sim.txt"
rm -f "$OUT/periods.csv"
rc=0
# the live comparison first: it needs the idle cores most
if [ "${LIVE:-1}" = 1 ]; then
  if left; then
    log "live burst comparison (--strict)"
    extra=()
    [ -f "$MODEL_DIR/af_cnn.onnx" ] && extra=(--model "$MODEL_DIR/af_cnn.onnx")
    lcores=${LIVE_CORES:-$NCPU}
    lcmax=${LIVE_CMAX:-$(( lcores / 2 > 1 ? lcores / 2 : 1 ))}
    : > "$OUT/live.txt"
    for run in $(seq 1 "${LIVE_RUNS:-1}"); do
      left || { log "live run $run skipped: past the ${BUDGET_S} s budget"; break; }
      log "live run $run: --cores $lcores --cmax $lcmax"
      echo "# run $run: load average before: $(cut -d' ' -f1-3 /proc/loadavg), $NCPU cores" >> "$OUT/live.txt"
      # shellcheck disable=SC2086
      python3 "$SRC/tests/integration/asyfunc_live.py" "$VARIO" "$SRC" --strict "${extra[@]}" \
        --cores "$lcores" --cmax "$lcmax" ${LIVE_ARGS:-} > "$OUT/live.$run.txt" 2>&1 || rc=1
      cat "$OUT/live.$run.txt" >> "$OUT/live.txt"
      grep -E '^(mode=|ok:|FAIL|not checked|body:)' "$OUT/live.$run.txt" | tee -a "$OUT/summary.txt"
      save
    done
  else
    log "live comparison skipped: past the ${BUDGET_S} s budget"
  fi
fi
[ "$MODELS" = none ] && MODELS=
for m in $MODELS; do
  left || { log "skipped $m: past the ${BUDGET_S} s budget"; continue; }
  if [ -f "$MODEL_DIR/$m/model.onnx" ]; then
    onnx=$MODEL_DIR/$m/model.onnx
  elif [ -f "$MODEL_DIR/$m/model.onnx.gz" ]; then
    onnx=$TMPD/$m.onnx
    gzip -dc "$MODEL_DIR/$m/model.onnx.gz" > "$onnx"
  else
    log "no $MODEL_DIR/$m/model.onnx(.gz): $m skipped"; rc=1; continue
  fi
  log "$m: profiling on 1..$CMAX cores"
  if ! "$VARIO" perf "$onnx" --blocks --name "$m" --cmax "$CMAX" --runs "$RUNS" \
       --output "$OUT/$m.json" > "$OUT/$m.blocks.txt" 2> "$OUT/$m.blocks.err"; then
    log "$m: vario perf --blocks failed: $(tail -1 "$OUT/$m.blocks.err")"; rc=1
    rm -f "$onnx"; continue
  fi
  rm -f "$TMPD/$m.onnx"
  grep '^model=' "$OUT/$m.blocks.txt" | tee -a "$OUT/summary.txt"
  log "$m: simulator"
  # shellcheck disable=SC2086
  "$VARIO" asyfunc "$OUT/$m.json" --periods-csv "$OUT/periods.csv" -v ${ASYFUNC_ARGS:-} \
    > "$TMPD/sim.out" 2>> "$OUT/sim.txt" || rc=1
  cat "$TMPD/sim.out" >> "$OUT/sim.txt"
  tee -a "$OUT/summary.txt" < "$TMPD/sim.out"
  # the same profile cut to the 2 cores of the development box: what
  # C_max alone changes
  if [ "$CMAX" -gt 2 ]; then
    echo "# $m with --cmax 2" >> "$OUT/sim.txt"
    # shellcheck disable=SC2086
    "$VARIO" asyfunc "$OUT/$m.json" --cmax 2 -v ${ASYFUNC_ARGS:-} > "$TMPD/sim.out" \
      2>> "$OUT/sim.txt" || rc=1
    cat "$TMPD/sim.out" >> "$OUT/sim.txt"
    sed 's/$/ cmax=2/' "$TMPD/sim.out" | tee -a "$OUT/summary.txt"
  fi
  # the paper's gamma: 2 requests in the one queue, not 2 per body
  echo "# $m with --gamma-total" >> "$OUT/sim.txt"
  # shellcheck disable=SC2086
  "$VARIO" asyfunc "$OUT/$m.json" --policy asyfunc --gamma-total -v ${ASYFUNC_ARGS:-} \
    > "$TMPD/sim.out" 2>> "$OUT/sim.txt" || rc=1
  cat "$TMPD/sim.out" >> "$OUT/sim.txt"
  sed 's/$/ gamma=total/' "$TMPD/sim.out" | tee -a "$OUT/summary.txt"
  save
done
log "done, rc=$rc"
save
exit $rc
