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
P="$root/models/pipelines/fashion_scenes"
D="$root/models/fmnist-data"
FLAGS=(--threads 1 --max-batch 4 --runs 10 --precisions fp32 --quiet)

rm -rf "$OUT"
mkdir -p "$OUT"
echo "== register (fmnist_linear, fmnist_mlp, fmnist_cnn_bn; the three detectors)"
for m in fmnist_linear fmnist_mlp fmnist_cnn_bn; do
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
echo "== serve: --cores $CORES --pipeline-policy $POLICY --inferline-rate $RATE --pipeline-tick-ms $TICK_MS"
"$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 --grpc-port -1 \
  --cores "$CORES" --admin-token-file "$OUT/admin.token" --pipeline-policy "$POLICY" \
  --inferline-rate "$RATE" --pipeline-tick-ms "$TICK_MS" >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
PORT=$(vr_listen_port "$OUT/serve.log")
"$V" pipeline register "$P/pipeline.json" --port "$PORT" >/dev/null
sleep 2

echo "== load: $PHASES (rate:cv:seconds; SLO ${SLO_MS} ms)"
echo "phase,rate,cv,sent,ok,dropped,slo_attainment,p99_ms" >"$OUT/phases.csv"
(
  i=0
  for ph in $PHASES; do
    i=$((i + 1))
    IFS=: read -r r cv secs <<<"$ph"
    "$V" bench --port "$PORT" --pipeline fashion_scenes --rate "$r" --duration "$secs" \
      --arrival gamma --cv "$cv" --slo-ms "$SLO_MS" --connections 32 --binary \
      --payloads 8 --input "$P/sample.npy" --json --no-progress 2>/dev/null \
      >"$OUT/bench_$i.json" || true
    /usr/bin/python3 -c "
import json; b = json.load(open('$OUT/bench_$i.json'))
print(f\"$i,$r,$cv,{b['sent']},{b['ok']},{b['dropped']},{b['slo_attainment']:.4f},{b['p99_us'] / 1000:.1f}\")" >>"$OUT/phases.csv"
  done
  touch "$OUT/load.done"
) &
LOAD=$!
/usr/bin/python3 - "$PORT" "$OUT/inferline_live.csv" "$OUT/load.done" <<'PYEOF'
import json, os, re, sys, time, urllib.request
port, csv, done = sys.argv[1], sys.argv[2], sys.argv[3]
seen = -1.0
hdr = "t_s,demand_qps,instances,slo_att,requests,met,dropped,variants"
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
            n = sum(int(x) for x in re.findall(r"\*(\d+)", h["variants"]))
            att = "" if h["slo_attainment"] is None else f"{h['slo_attainment']:.3f}"
            line = (f"{h['t_s']:.1f},{h['demand_qps']:.0f},{n},{att},{h['requests']},"
                    f"{h['met']},{h['dropped']},{h['variants']}")
            print(line, flush=True)
            f.write(line + "\n")
        if os.path.exists(done):
            idle += 1
            if idle > 2:
                break
        time.sleep(1)
PYEOF
wait $LOAD || true
echo "== per phase (client side): $OUT/phases.csv"
column -s, -t <"$OUT/phases.csv" 2>/dev/null || cat "$OUT/phases.csv"
grep "$POLICY plan for" "$OUT/serve.log" | sed 's/.*pipes_policy.c:[0-9]* //' | tail -20
