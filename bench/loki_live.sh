#!/usr/bin/env bash
# Loki live (issue 15): the example pipeline (models/pipelines/fashion_scenes)
# served by `vario serve --pipeline-policy loki` on a fixed set of cores,
# under open-loop load that rises past what the most accurate detector can
# carry there and falls again. Prints one line per second (from the
# policy's history in GET /v2/pipelines/fashion_scenes):
#   t_s demand_qps ewma plan_acc scaled workers slo_att served_acc requests
#   met dropped early rerouted variants-per-task
# and writes them to $OUT/loki_live.csv, plus per-phase totals from the
# client (vario bench --json) in $OUT/phases.csv.
#
# Usage: bench/loki_live.sh [BUILD_DIR]
#   env: OUT (default BUILD_DIR/loki-live), CORES (4), PER_CORE (canvases/s
#        the most accurate detector carries per core by plan: sets the
#        --pipeline-slack from its measured profile; default 25), PHASE_S
#        (8), PHASES (rates, canvases/s; default "10 40 80 120 80 40 10"),
#        PERIOD_MS (replan period, 2000), SLO_MS (end to end, 100)
#
# Why PER_CORE: a detector canvas takes ~0.4 ms here, so by its profile a
# core would carry ~2500 canvases/s, far beyond what the HTTP front end of
# a shared 2-core machine sustains; the headroom makes the plan's capacity
# what this machine can deliver, so the crossing from hardware scaling to
# accuracy scaling happens at rates the client can offer.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
BUILD=${1:-build}
V="$BUILD/vario"
OUT=${OUT:-$BUILD/loki-live}
CORES=${CORES:-4}
PER_CORE=${PER_CORE:-25}
PHASE_S=${PHASE_S:-8}
PHASES=${PHASES:-"10 40 80 120 80 40 10"}
PERIOD_MS=${PERIOD_MS:-2000}
SLO_MS=${SLO_MS:-100}
. "$root/bench/lib/pipeline_live.sh"

vr_pipeline_live_register fmnist_cnn_s

# the headroom from the most accurate detector's measured profile
"$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 --grpc-port -1 \
  >"$OUT/probe.log" 2>&1 &
probe=$!
trap 'kill -INT $probe 2>/dev/null || true; wait $probe 2>/dev/null || true' EXIT
port=$(vr_listen_port "$OUT/probe.log" "$probe")
SLACK=$(/usr/bin/python3 - "$port" "$PER_CORE" <<'PYEOF'
import json, sys, urllib.request
j = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v2/apps/fscenes_detect"))
p50 = min(v["p50_ms_b1"] for v in j["apps"]["fscenes_detect"] if v["model"] == "fscenes_det_large")
print(f"{1000.0 / p50 / float(sys.argv[2]):.3f}")
PYEOF
)
kill -INT $probe; wait $probe || true
echo "== serve: --cores $CORES --pipeline-policy loki --pipeline-slack $SLACK (large detector: $PER_CORE canvases/s per core by plan)"
vr_pipeline_live_serve --pipeline-policy loki --pipeline-period-ms "$PERIOD_MS" \
  --pipeline-slack "$SLACK"

echo "== load: $PHASES canvases/s, ${PHASE_S} s each (SLO ${SLO_MS} ms)"
echo "phase,rate,sent,ok,dropped,rejected,slo_attainment,p99_ms" >"$OUT/phases.csv"
load() {
  local i=0 r
  for r in $PHASES; do
    i=$((i + 1))
    vr_pipeline_live_phase "$i" "$i,$r" "sent ok dropped rejected" --rate "$r" \
      --duration "$PHASE_S" --slo-ms "$SLO_MS"
  done
}
vr_pipeline_live_load load
# the follower gives up 120 s after the load should have ended
limit=$(awk -v n="$(wc -w <<<"$PHASES")" -v s="$PHASE_S" 'BEGIN { print n * s + 120 }')
PYTHONPATH="$root/bench/lib" /usr/bin/python3 - "$PORT" "$OUT/loki_live.csv" "$OUT/load.done" \
  "$limit" <<'PYEOF'
import sys
from pipeline_history import follow

def line_of(h):
    att = "" if h["slo_attainment"] is None else f"{h['slo_attainment']:.3f}"
    acc = "" if h["accuracy"] is None else f"{h['accuracy']:.2f}"
    return (f"{h['t_s']:.0f},{h['demand_qps']:.0f},{h['demand_ewma']:.0f},"
            f"{h['plan_accuracy']:.2f},{int(h['accuracy_scaled'])},{h['workers']},{att},"
            f"{acc},{h['requests']},{h['met']},{h['dropped']},{h['early_dropped']},"
            f"{h['rerouted']},{h['variants']}")

follow(*sys.argv[1:4], "t_s,demand_qps,ewma,plan_acc,scaled,workers,slo_att,served_acc,"
       "requests,met,dropped,early,rerouted,variants", line_of, idle_polls=4,
       limit_s=float(sys.argv[4]))
PYEOF
vr_pipeline_live_phases
curl -s "http://127.0.0.1:$PORT/v2/pipelines/fashion_scenes" >"$OUT/final.json" 2>/dev/null || true
grep -c "pipeline policy: " "$OUT/serve.log" | sed 's/^/actions applied by the pipeline policy: /'
grep "loki plan for" "$OUT/serve.log" | sed 's/.*pipes_policy.c:[0-9]* //' | tail -20
