#!/bin/sh
# The live dashboard in a real browser (issue 19): headless Chromium loads
# /dashboard from `vario serve` while `vario bench` drives load, and the
# page's charts must have received data (polls, points, a non-zero request
# rate). Exit 77 (skipped) when Chromium or Chart.js (fetched from the npm
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
ok = d["charts"] == "function" and int(d["polls"]) >= 3 and int(d["points"]) >= 5 \
    and float(d["maxRps"]) > 0 and "fmnist_mlp" in d["variants"]
sys.exit(0 if ok else 1)' || { echo "FAIL: the charts did not receive data"; exit 1; }
echo "dashboard: ok"
