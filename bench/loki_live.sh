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
P="$root/models/pipelines/fashion_scenes"
D="$root/models/fmnist-data"
FLAGS=(--threads 1 --max-batch 4 --runs 10 --precisions fp32 --quiet)

rm -rf "$OUT"
mkdir -p "$OUT"
echo "== register (fmnist_linear, fmnist_mlp, fmnist_cnn_s; the three detectors)"
for m in fmnist_linear fmnist_mlp fmnist_cnn_s; do
  "$V" register --store "$OUT/store.db" --repo "$OUT/repo" --app fashion \
    --model "$root/models/fmnist/$m/model.onnx" --input "$D/val_inputs.npy" \
    --labels "$D/val_labels.npy" "${FLAGS[@]}"
done
for m in fscenes_det_tiny fscenes_det_small fscenes_det_large; do
  acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$P/$m/config.json'))['accuracy'])")
  "$V" register --store "$OUT/store.db" --repo "$OUT/repo" --app fscenes_detect \
    --model "$P/$m/model.onnx" --name "$m" --declared-accuracy "$acc" "${FLAGS[@]}"
done
vr_admin_token "$OUT/admin.token"

# the headroom from the most accurate detector's measured profile
"$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 --grpc-port -1 \
  >"$OUT/probe.log" 2>&1 &
probe=$!
port=$(vr_listen_port "$OUT/probe.log")
SLACK=$(/usr/bin/python3 - "$port" "$PER_CORE" <<'PYEOF'
import json, sys, urllib.request
j = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v2/apps/fscenes_detect"))
p50 = min(v["p50_ms_b1"] for v in j["apps"]["fscenes_detect"] if v["model"] == "fscenes_det_large")
print(f"{1000.0 / p50 / float(sys.argv[2]):.3f}")
PYEOF
)
kill -INT $probe; wait $probe || true
echo "== serve: --cores $CORES --pipeline-policy loki --pipeline-slack $SLACK (large detector: $PER_CORE canvases/s per core by plan)"
"$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 --grpc-port -1 \
  --cores "$CORES" --admin-token-file "$OUT/admin.token" --pipeline-policy loki \
  --pipeline-period-ms "$PERIOD_MS" --pipeline-slack "$SLACK" >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
PORT=$(vr_listen_port "$OUT/serve.log")
"$V" pipeline register "$P/pipeline.json" --port "$PORT" >/dev/null
sleep 2

echo "== load: $PHASES canvases/s, ${PHASE_S} s each (SLO ${SLO_MS} ms)"
echo "phase,rate,sent,ok,dropped,rejected,slo_attainment,p99_ms" >"$OUT/phases.csv"
(
  i=0
  for r in $PHASES; do
    i=$((i + 1))
    "$V" bench --port "$PORT" --pipeline fashion_scenes --rate "$r" --duration "$PHASE_S" \
      --slo-ms "$SLO_MS" --connections 32 --binary --payloads 8 --input "$P/sample.npy" \
      --json --no-progress 2>/dev/null >"$OUT/bench_$i.json" || true
    /usr/bin/python3 -c "
import json; b = json.load(open('$OUT/bench_$i.json'))
print(f\"$i,$r,{b['sent']},{b['ok']},{b['dropped']},{b['rejected']},{b['slo_attainment']:.4f},{b['p99_us'] / 1000:.1f}\")" >>"$OUT/phases.csv"
  done
  touch "$OUT/load.done"
) &
LOAD=$!
/usr/bin/python3 - "$PORT" "$OUT/loki_live.csv" "$OUT/load.done" <<'PYEOF'
import json, os, sys, time, urllib.request
port, csv, done = sys.argv[1], sys.argv[2], sys.argv[3]
seen = -1.0
hdr = "t_s,demand_qps,ewma,plan_acc,scaled,workers,slo_att,served_acc,requests,met,dropped,early,rerouted,variants"
print(hdr)
with open(csv, "w") as f:
    f.write(hdr + "\n")
    idle = 0
    while True:
        j = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/pipelines/fashion_scenes"))
        for h in j["policy"]["history"]:
            if h["t_s"] <= seen:
                continue
            seen = h["t_s"]
            att = "" if h["slo_attainment"] is None else f"{h['slo_attainment']:.3f}"
            acc = "" if h["accuracy"] is None else f"{h['accuracy']:.2f}"
            line = (f"{h['t_s']:.0f},{h['demand_qps']:.0f},{h['demand_ewma']:.0f},"
                    f"{h['plan_accuracy']:.2f},{int(h['accuracy_scaled'])},{h['workers']},{att},"
                    f"{acc},{h['requests']},{h['met']},{h['dropped']},{h['early_dropped']},"
                    f"{h['rerouted']},{h['variants']}")
            print(line, flush=True)
            f.write(line + "\n")
        if os.path.exists(done):
            idle += 1
            if idle > 4:
                break
        time.sleep(1)
PYEOF
wait $LOAD || true
echo "== per phase (client side): $OUT/phases.csv"
column -s, -t <"$OUT/phases.csv" 2>/dev/null || cat "$OUT/phases.csv"
curl -s "http://127.0.0.1:$PORT/v2/pipelines/fashion_scenes" >"$OUT/final.json" 2>/dev/null || true
grep -c "pipeline policy: " "$OUT/serve.log" | sed 's/^/actions applied by the pipeline policy: /'
grep "loki plan for" "$OUT/serve.log" | sed 's/.*pipes_policy.c:[0-9]* //' | tail -20
