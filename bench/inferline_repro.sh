#!/bin/sh
# InferLine (SoCC'20 Fig. 5) in the pipeline simulator: cost and P99 SLO
# misses of InferLine (planner + tuner), planner only, CG-Peak and CG-Mean
# (coarse-grained, re-scaled by AutoScale as in the paper's §6), and
# cg_peak_static / cg_mean_static (the same provisioning never re-scaled:
# what Fig. 5 compares with the planner).
#   bench/inferline_repro.sh DATA_DIR APP
# DATA_DIR has the layout of ../shared/data/loki (apps/APP.json,
# model_variants/APP/, profiling/simulator_runtimes.csv, branching.csv).
# Prints exactly one line per policy:
#   policy=<name> cost=<$ per hour> p99_miss_pct=<%> cv=<cv>
# Environment: CV (default 1; the paper also runs 4), RATE (root qps,
# default 30), SLO_MS (default: the app's), RAMP (evaluation rate ramps to
# RAMP x RATE; default none), SEED (default 1), ACCEL (hardware options
# as NAME=PRICE_PER_HOUR,...; default onnxruntime_gpu_pascal=0.90, the
# accelerator column of the runtimes CSV), BIN (the bench binary,
# default build/bench/bench_inferline_repro in this checkout), DETAIL=1 keeps the details
# (configuration, P99, tuner actions, planner time) on each line.
# Each policy plans on a 60-s Gamma sample trace (seed SEED) and serves a
# 120-s evaluation trace of the same process (another seed), service times
# drawn from the profiles' percentiles; replicas the tuner adds serve after
# 1 s. Skips (exit 0, message on stderr) when DATA_DIR lacks the app.
set -e
if [ $# -ne 2 ]; then
  echo "usage: $0 DATA_DIR APP" >&2
  exit 2
fi
DATA=$1 APP=$2
if [ ! -f "$DATA/apps/$APP.json" ] || [ ! -f "$DATA/profiling/simulator_runtimes.csv" ]; then
  echo "inferline_repro: skipped: no $DATA/apps/$APP.json or profiling/simulator_runtimes.csv" >&2
  exit 0
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bench/bench_inferline_repro}
if [ ! -x "$BIN" ]; then
  cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$ROOT/build" -j "$(nproc)" --target bench_inferline_repro >/dev/null
fi
set -- "$DATA" "$APP" --cv "${CV:-1}" --rate "${RATE:-30}" --seed "${SEED:-1}"
[ -n "$SLO_MS" ] && set -- "$@" --slo "$SLO_MS"
[ -n "$RAMP" ] && set -- "$@" --ramp "$RAMP"
[ -n "$ACCEL" ] && set -- "$@" --accel "$ACCEL"
# the binary's status is kept (no pipe): 77 (it found no data for the app)
# is the documented skip, anything else non-zero is a failure
rc=0
out=$("$BIN" "$@") || rc=$?
if [ "$rc" -eq 77 ]; then
  echo "inferline_repro: skipped: $BIN found no data for $APP in $DATA" >&2
  exit 0
fi
if [ -n "$out" ]; then
  if [ "${DETAIL:-0}" = 1 ]; then
    printf '%s\n' "$out"
  else
    printf '%s\n' "$out" | sed 's/  .*//'
  fi
fi
exit "$rc"
