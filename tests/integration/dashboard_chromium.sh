#!/bin/sh
# The live dashboard in a real browser (issue 19): headless Chromium loads
# /dashboard from `vario serve` while `vario bench` drives load, and the
# page's charts must have received data. Two servers:
#  1. a model repository (per-model requests/s, p99, instances);
#  2. model-less serving with the fashion_scenes pipeline, driven by a
#     pipeline bench and an app bench at once: SLO attainment and p99 per
#     app (one series per app, not pooled), and the pipeline view (its
#     requests/drops, end-to-end attainment and p99, a row per task with
#     the variants serving it).
# Exit 77 (skipped) when Chromium or Chart.js (fetched from the npm
# registry by the build) is not there; make check installs Chromium.
#   usage: dashboard_chromium.sh VARIO SOURCE_DIR WEB_DIR [SCREENSHOT.png]
V=$1
ROOT=$2
WEB=$3
SHOT=$4
command -v chromium >/dev/null || { echo "skip: no chromium"; exit 77; }
[ -f "$WEB/chart.umd.js" ] || { echo "skip: Chart.js not fetched by the build (offline?)"; exit 77; }
. "$ROOT/scripts/lib.sh"
T=$(mktemp -d /tmp/vr_dash.XXXXXX)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
mkdir -p "$T/repo" && cp -r "$ROOT/models/fmnist/fmnist_mlp" "$T/repo/"
VARIO_WEB_ROOT=$WEB "$V" serve --repo "$T/repo" --port 0 --grpc-port -1 2> "$T/serve.log" &
pids="$!"
port=$(vr_listen_port "$T/serve.log") || { echo "FAIL: server did not start"; exit 1; }
"$V" bench --port "$port" --model fmnist_mlp --rate 200 --duration 20 --no-progress \
  --input "$ROOT/models/fmnist-data/val_inputs.npy" > "$T/bench.out" 2>&1 &
pids="$pids $!"
sleep 1
out=$(timeout 90 /usr/bin/python3 "$ROOT/scripts/dashboard_shot.py" \
        "http://127.0.0.1:$port/dashboard" 6 $SHOT) || { echo "FAIL: browser: $out"; exit 1; }
echo "page status: $out"
echo "$out" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
s = json.loads(d.get("series", "{}"))
ok = d["charts"] == "function" and int(d["polls"]) >= 3 and int(d["points"]) >= 5 \
    and float(d["maxRps"]) > 0 and "fmnist_mlp" in d["variants"] \
    and "fmnist_mlp" in s.get("c_p99", []) and "fmnist_mlp" in s.get("c_slo", [])
sys.exit(0 if ok else 1)' || { echo "FAIL: the charts did not receive data"; exit 1; }
echo "dashboard (model repository): ok"

# -- 2. model-less serving: apps and a pipeline ----------------------------
kill $pids 2>/dev/null; wait 2>/dev/null; pids=""
P="$ROOT/models/pipelines/fashion_scenes"
D="$ROOT/models/fmnist-data"
FAST="--threads 1 --max-batch 4 --runs 3 --precisions fp32 --quiet"
"$V" register --store "$T/store.db" --repo "$T/repo2" --app fashion $FAST \
  --model "$ROOT/models/fmnist/fmnist_linear/model.onnx" \
  --input "$D/val_inputs.npy" --labels "$D/val_labels.npy" || { echo "FAIL: register"; exit 1; }
"$V" register --store "$T/store.db" --repo "$T/repo2" --app fscenes_detect $FAST \
  --name fscenes_det_tiny --model "$P/fscenes_det_tiny/model.onnx" \
  --declared-accuracy 80 || { echo "FAIL: register detector"; exit 1; }
vr_admin_token "$T/admin.token"
VARIO_WEB_ROOT=$WEB "$V" serve --repo "$T/repo2" --store "$T/store.db" --port 0 --grpc-port -1 \
  --cores 64 --admin-token-file "$T/admin.token" 2> "$T/serve2.log" &
pids="$!"
port=$(vr_listen_port "$T/serve2.log") || { echo "FAIL: server 2 did not start"; exit 1; }
"$V" pipeline register "$P/pipeline.json" --port "$port" >/dev/null ||
  { echo "FAIL: pipeline register"; exit 1; }
"$V" bench --port "$port" --pipeline fashion_scenes --rate 10 --duration 25 --slo-ms 500 \
  --binary --input "$P/sample.npy" --no-progress > "$T/bench_pipe.out" 2>&1 &
pids="$pids $!"
"$V" bench --port "$port" --app fashion --rate 20 --duration 25 --slo-ms 200 --no-progress \
  --input "$D/val_inputs.npy" > "$T/bench_app.out" 2>&1 &
pids="$pids $!"
sleep 2
out=$(timeout 90 /usr/bin/python3 "$ROOT/scripts/dashboard_shot.py" \
        "http://127.0.0.1:$port/dashboard" 8) || { echo "FAIL: browser 2: $out"; exit 1; }
echo "page status (model-less + pipeline): $out"
echo "$out" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
s = json.loads(d.get("series", "{}"))
want = {
    "per-app SLO attainment": {"fashion", "fscenes_detect"} <= set(s.get("c_slo", [])),
    "per-app p99": {"fashion", "fscenes_detect"} <= set(s.get("c_p99", [])),
    "no pooled all-apps series": "all" not in s.get("c_slo", []) + s.get("c_p99", []),
    "pipeline requests/s": "fashion_scenes requests" in s.get("c_prps", []),
    "pipeline drops/s": "fashion_scenes dropped" in s.get("c_prps", []),
    "pipeline attainment": "fashion_scenes" in s.get("c_patt", []),
    "pipeline p99": "fashion_scenes" in s.get("c_pp99", []),
    "pipeline accuracy served": "fashion_scenes (pipeline)" in s.get("c_acc", []),
    "pipeline cost": "fashion_scenes (pipeline)" in s.get("c_cost", []),
    "a row per task": int(d.get("pipeRows", 0)) == 3,
    "the variants serving each task": "fscenes_det_tiny" in d.get("pipes", "")
                                      and "fmnist_linear" in d.get("pipes", ""),
}
bad = [k for k, ok in want.items() if not ok]
print("missing:", bad if bad else "nothing")
sys.exit(1 if bad else 0)' || { echo "FAIL: the per-app or pipeline views did not receive data"; exit 1; }
echo "dashboard (apps + pipeline): ok"
