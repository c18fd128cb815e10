#!/bin/sh
# Loki (HPDC'24) reproduction in the pipeline simulator: Loki, the three
# baselines and the routing ablation on one of Loki's apps.
#   bench/loki_repro.sh DATA_DIR APP
# DATA_DIR has the layout of ../shared/data/loki (apps/APP.json,
# model_variants/APP/<task>, profiling/simulator_runtimes.csv,
# profiling/branching.csv). Prints exactly one line per policy:
#   policy=<name> violations_pct=<x> capacity_qps=<x> offpeak_servers=<x> accuracy_pct=<x>
# Environment: VARIO (binary; default build/vario, built if missing),
# WORKERS (20, as in the paper), DEMAND (root rate points T:QPS,...; the
# default: 2 min off-peak at 30 qps, a 4-min ramp to 1200 qps, 2 min at the
# peak, a 4-min fall, 2 min off-peak; Poisson arrivals), SLACK (1.5: every
# planner provisions 1.5x the estimated demand), SEED (1), OUT (a directory
# for the per-policy CSV/JSON; default: a temporary one, removed).
# Exit 77 (skip) when the data is absent.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 DATA_DIR APP" >&2
  exit 2
fi
DATA=$1
APP=$2
if [ ! -f "$DATA/apps/$APP.json" ]; then
  echo "skip: $DATA/apps/$APP.json absent" >&2
  exit 77
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VARIO=${VARIO:-$ROOT/build/vario}
if [ ! -x "$VARIO" ]; then
  cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DVR_WERROR=OFF >/dev/null &&
    cmake --build "$ROOT/build" -j2 --target vario >/dev/null || exit 1
fi
DEMAND=${DEMAND:-0:30,120:30,360:1200,480:1200,720:30,840:30}
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  PREFIX=$OUT/$APP
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  PREFIX=$TMP/$APP
fi
"$VARIO" sim --loki "$DATA" --app "$APP" --workers "${WORKERS:-20}" \
  --demand "$DEMAND" --warmup 10 --slack "${SLACK:-1.5}" --seed "${SEED:-1}" \
  --policy loki,hw,proteus,infaas,loki_no_drop,loki_last_task,loki_per_task \
  --output "$PREFIX"
exit $?
