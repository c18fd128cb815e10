#!/usr/bin/env bash
# The pipeline demo (issue 14), `make demo-pipeline`:
#  1. registers the Fashion-MNIST family (app "fashion") and the three
#     fashion-scenes detectors (app "fscenes_detect", their measured
#     accuracy from models/pipelines/fashion_scenes/eval.json);
#  2. starts `vario serve --store` and registers
#     models/pipelines/fashion_scenes/pipeline.json with `vario pipeline`;
#  3. sends one canvas and prints the per-hop response;
#  4. drives rising open-loop load with `vario bench --pipeline`, and after
#     each phase reads GET /v2/pipelines/fashion_scenes;
#  5. prints and plots (gnuplot, $OUT/pipeline.png) per phase: end-to-end
#     SLO attainment, the served detectors' mean accuracy, the end-to-end
#     accuracy served (per request the mean over its leaf hops of the
#     product of the accuracies on the path, from GET /v2/dashboard/data),
#     the observed multiplicative factor of the detector task and the
#     instances per task.
# Usage: scripts/demo_pipeline.sh [BUILD_DIR]
#   env: VARIO_DEMO_DIR, DEMO_PHASE_S (default 5), DEMO_SLO_MS (default 50),
#        DEMO_PHASES (RATE:MIN_ACCURACY end to end, default
#        "20:0 100:0 200:0 200:80 400:80 800:80 100:0")
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
V="$BUILD/vario"
OUT=${VARIO_DEMO_DIR:-$BUILD/demo-pipeline}
PHASE_S=${DEMO_PHASE_S:-5}
SLO_MS=${DEMO_SLO_MS:-50}
# Load rises; from the fourth phase the requests ask for 80% end to end
# (so >= 89.4% per task), which the tiny detector cannot give.
PHASES=${DEMO_PHASES:-"20:0 100:0 200:0 200:80 400:80 800:80 100:0"}
P=models/pipelines/fashion_scenes

rm -rf "$OUT"
mkdir -p "$OUT"
echo "== 1. register the models"
vr_register_fmnist "$V" . "$OUT/store.db" "$OUT/repo" --threads 1 --max-batch 16 --runs 10
for m in fscenes_det_tiny fscenes_det_small fscenes_det_large; do
  acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$P/$m/config.json'))['accuracy'])")
  "$V" register --quiet --store "$OUT/store.db" --repo "$OUT/repo" --app fscenes_detect \
    --model "$P/$m/model.onnx" --name "$m" --declared-accuracy "$acc" \
    --threads 1 --max-batch 16 --runs 10
done
"$V" register --store "$OUT/store.db" --list

echo "== 2. serve, register the pipeline"
vr_admin_token "$OUT/admin.token"   # pipeline registration needs it
"$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 \
  --admin-token-file "$OUT/admin.token" >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
PORT=$(vr_listen_port "$OUT/serve.log")
"$V" pipeline register "$P/pipeline.json" --port "$PORT" >/dev/null
"$V" pipeline list --port "$PORT"

echo "== 3. one canvas (sample.npy row 0), hop by hop"
/usr/bin/python3 - "$PORT" "$P/sample.npy" "$P/sample_cells.npy" <<'PYEOF'
import json, sys, urllib.request, urllib.error
import numpy as np
x = np.load(sys.argv[2])[:1]
truth = np.load(sys.argv[3])[0]
body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                    "data": x.ravel().tolist()}], "parameters": {"latency_ms": 2000}}
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v2/pipelines/fashion_scenes/infer",
                             data=json.dumps(body).encode(), method="POST")
try:
    with urllib.request.urlopen(req) as r:
        j = json.load(r)
except urllib.error.HTTPError as e:
    j = json.load(e)
names = ["T-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
         "bag", "ankle boot"]
print(f"outcome {j['outcome']}, {j['latency_ms']:.2f} ms end to end")
for h in j["hops"]:
    what = ""
    if h["task"] != "detect" and h["outcome"] == "ok":
        logits = h["outputs"][0]["data"]
        what = f"-> {names[int(np.argmax(logits))]} (truth: {names[truth[h['region']]] if truth[h['region']] >= 0 else 'none'})"
    print(f"  hop {h['hop']} {h['task']:<13} region {h['region']:>2} {h['outcome']:<8} "
          f"{h.get('variant', ''):<34} queue {h['queue_ms']:.3f} ms compute {h['compute_ms']:.3f} ms "
          f"fan-out {h['fanout']} {what}")
PYEOF

echo "== 4. rising load (SLO ${SLO_MS} ms end to end)"
echo "phase,rate,min_acc,sent,ok,dropped,slo_attainment,p99_ms,det_accuracy,det_mult,inst_detect,inst_garment,inst_footwear_bag,e2e_accuracy" >"$OUT/phases.csv"
dash() { /usr/bin/python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/v2/dashboard/data?since=1e18').read().decode())"; }
dash >"$OUT/dash_0.json"
i=0
for ph in $PHASES; do
  i=$((i + 1))
  r=${ph%%:*}
  acc=${ph##*:}
  "$V" bench --port "$PORT" --pipeline fashion_scenes --slo-ms "$SLO_MS" --rate "$r" \
    --min-accuracy "$acc" \
    --duration "$PHASE_S" --connections 64 --binary --payloads 8 --input "$P/sample.npy" --json \
    >"$OUT/bench_$i.json" 2>/dev/null || true
  "$V" pipeline show fashion_scenes --port "$PORT" >"$OUT/show_$i.json"
  dash >"$OUT/dash_$i.json"
  /usr/bin/python3 - "$OUT" "$i" "$r" "$acc" <<'PYEOF' | tee -a "$OUT/phases.csv"
import json, sys
out, i, r, acc = sys.argv[1:5]
b = json.load(open(f"{out}/bench_{i}.json"))
s = json.load(open(f"{out}/show_{i}.json"))
prev = json.load(open(f"{out}/show_{int(i) - 1}.json")) if int(i) > 1 else None
tasks = {t["name"]: t for t in s["tasks"]}
det = tasks["detect"]
# this phase only: the routing counters minus the previous phase's
before = {v["variant"]: v for v in prev["tasks"][0]["routing"]} if prev else {}
phase = [(v["variant"], v["requests"] - before.get(v["variant"], {}).get("requests", 0),
          v["fanout"] - before.get(v["variant"], {}).get("fanout", 0)) for v in det["routing"]]
served = sum(n for _, n, _ in phase)
va = {v["name"]: v["accuracy"] for v in det["candidate_variants"]}
mean_acc = sum(va.get(name, 0) * n for name, n, _ in phase) / max(served, 1)
mult = sum(f for _, _, f in phase) / max(served, 1)
def e2e(k):
    d = json.load(open(f"{out}/dash_{k}.json"))
    p = [q for q in d["pipelines"] if q["name"] == "fashion_scenes"]
    return (p[0]["accuracy_sum"], p[0]["accuracy_n"]) if p else (0.0, 0)
(s1, n1), (s0, n0) = e2e(i), e2e(int(i) - 1)
e2e_acc = (s1 - s0) / (n1 - n0) if n1 > n0 else float("nan")
def inst(t):
    apps = tasks[t].get("serving", {}).get("apps", {})
    return sum(v["instances"] for vs in apps.values() for v in vs)
print(f"{i},{r},{acc},{b['sent']},{b['ok']},{b['dropped']},{b['slo_attainment']:.4f},"
      f"{b['p99_us'] / 1000:.2f},{mean_acc:.2f},{mult:.3f},"
      f"{inst('detect')},{inst('garment')},{inst('footwear_bag')},{e2e_acc:.2f}")
PYEOF
done
curl_metrics() { /usr/bin/python3 -c "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())"; }
curl_metrics | grep '^vario_pipeline_' | grep -v '_bucket' >"$OUT/metrics.txt" || true
echo "== 5. per phase ($OUT/phases.csv); pipeline metrics in $OUT/metrics.txt"
column -s, -t <"$OUT/phases.csv" 2>/dev/null || cat "$OUT/phases.csv"
grep multiplicative_factor "$OUT/metrics.txt" || true

kill $SERVER; wait $SERVER 2>/dev/null || true
trap - EXIT

if command -v gnuplot >/dev/null; then
  gnuplot <<GPEOF
set datafile separator ","
set terminal pngcairo size 900,900 noenhanced
set output "$OUT/pipeline.png"
set multiplot layout 4,1 title "Vario pipeline demo: fashion_scenes, SLO ${SLO_MS} ms end to end"
set key left top
set xlabel "phase (rate:min_accuracy ${PHASES})"
set ylabel "SLO attainment"
set yrange [0:1.05]
plot "$OUT/phases.csv" every ::1 using 1:7 with linespoints title "end-to-end on time / sent"
set autoscale y
set ylabel "accuracy %"
plot "" every ::1 using 1:9 with linespoints title "detector accuracy (served mix)", "" every ::1 using 1:14 with linespoints title "end to end (product along the path)"
set ylabel "mult. factor"
plot "" every ::1 using 1:10 with linespoints title "detect: child requests per request"
set ylabel "instances"
set yrange [0:*]
plot "" every ::1 using 1:11 with linespoints title "detect", "" every ::1 using 1:12 with linespoints title "garment", "" every ::1 using 1:13 with linespoints title "footwear_bag"
unset multiplot
GPEOF
  echo "plot: $OUT/pipeline.png"
fi
