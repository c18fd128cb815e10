#!/usr/bin/env bash
# InferLine live (issue 16): the example pipeline (models/pipelines/
# fashion_scenes) served by `vario serve --pipeline-policy inferline`: the
# planner provisions it for a Gamma CV 1 sample at RATE canvases/s (the
# pipeline simulator is its estimator), then the tuner runs every tick.
# Open-loop load in phases (RATE:CV:SECONDS; default: the sample's rate,
# a CV 4 burst at 10x, the sample's rate again for 80 s, long enough
# for the paper's 15-s settle and 30-s look-back). Prints one line per
# tick from the policy's history in GET /v2/pipelines/fashion_scenes:
#   t_s demand_qps instances slo_att requests met dropped variants-per-task
# (also $OUT/inferline_live.csv) and per phase the client's view
# (vario bench --json: sent, ok, SLO attainment, p99) in $OUT/phases.csv.
#
# Usage: bench/inferline_live.sh [BUILD_DIR]
#   env: OUT (default BUILD_DIR/inferline-live), CORES (6), RATE (4),
#        PHASES (default "4:1:10 40:4:12 4:1:80"), TICK_MS (200),
#        SLO_MS (end to end, 100), POLICY (inferline; or inferline_plan,
#        cg_peak, cg_mean, ... to compare)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
BUILD=${1:-build}
V="$BUILD/vario"
OUT=${OUT:-$BUILD/inferline-live}
CORES=${CORES:-6}
RATE=${RATE:-4}
PHASES=${PHASES:-"$RATE:1:10 $((10 * RATE)):4:12 $RATE:1:80"}
TICK_MS=${TICK_MS:-200}
SLO_MS=${SLO_MS:-100}
POLICY=${POLICY:-inferline}
. "$root/bench/lib/pipeline_live.sh"

vr_pipeline_live_register fmnist_cnn_bn
echo "== serve: --cores $CORES --pipeline-policy $POLICY --inferline-rate $RATE --pipeline-tick-ms $TICK_MS"
vr_pipeline_live_serve --pipeline-policy "$POLICY" --inferline-rate "$RATE" \
  --pipeline-tick-ms "$TICK_MS"

echo "== load: $PHASES (rate:cv:seconds; SLO ${SLO_MS} ms)"
echo "phase,rate,cv,sent,ok,dropped,slo_attainment,p99_ms" >"$OUT/phases.csv"
load() {
  local i=0 ph r cv secs
  for ph in $PHASES; do
    i=$((i + 1))
    IFS=: read -r r cv secs <<<"$ph"
    vr_pipeline_live_phase "$i" "$i,$r,$cv" "sent ok dropped" --rate "$r" --duration "$secs" \
      --arrival gamma --cv "$cv" --slo-ms "$SLO_MS"
  done
}
vr_pipeline_live_load load
# the follower gives up 120 s after the load should have ended
limit=$(tr ' ' '\n' <<<"$PHASES" | awk -F: '{ s += $3 } END { print s + 120 }')
PYTHONPATH="$root/bench/lib" /usr/bin/python3 - "$PORT" "$OUT/inferline_live.csv" "$OUT/load.done" \
  "$limit" <<'PYEOF'
import re, sys
from pipeline_history import follow

def line_of(h):
    n = sum(int(x) for x in re.findall(r"\*(\d+)", h["variants"]))
    att = "" if h["slo_attainment"] is None else f"{h['slo_attainment']:.3f}"
    return (f"{h['t_s']:.1f},{h['demand_qps']:.0f},{n},{att},{h['requests']},"
            f"{h['met']},{h['dropped']},{h['variants']}")

follow(*sys.argv[1:4], "t_s,demand_qps,instances,slo_att,requests,met,dropped,variants",
       line_of, idle_polls=2, limit_s=float(sys.argv[4]))
PYEOF
vr_pipeline_live_phases
grep "$POLICY plan for" "$OUT/serve.log" | sed 's/.*pipes_policy.c:[0-9]* //' | tail -20
