#!/usr/bin/env bash
# The end-to-end model-less demo (issue 6), `make demo`:
#  1. registers the committed Fashion-MNIST family for app "fashion"
#     (validation, variant generation, profiling -> SQLite store);
#  2. starts `vario serve --store` (control loop + /v2/apps API);
#  3. shows per-query selection: an accuracy floor, a tight SLO, and an
#     infeasible request answered 400 with the closest variant;
#  4. drives rising then falling open-loop load with `vario bench --app`;
#  5. prints which variants served, SLO attainment, accuracy and cost per
#     second, and plots them (gnuplot) to $OUT/demo.png.
# Usage: scripts/demo.sh [BUILD_DIR]   (env: VARIO_DEMO_DIR, DEMO_PHASE_S)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
V="$BUILD/vario"
OUT=${VARIO_DEMO_DIR:-$BUILD/demo}
PHASE_S=${DEMO_PHASE_S:-6}
DATA=models/fmnist-data
SLO_MS=${DEMO_SLO_MS:-20}
# Load phases RATE:MIN_ACCURACY — load rises and falls, and the accuracy
# the queries ask for changes, so variants are loaded, replaced, unloaded.
PHASES=${DEMO_PHASES:-"50:85 300:85 1000:88 3000:92 6000:92 1000:88 50:85"}

"$V" version
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== 1. register the Fashion-MNIST models for app 'fashion'"
# Bounded profiling (threads 1..2, max batch 1..16, 10 runs per batch
# size) so the demo takes seconds; `vario register --help` for more.
vr_register_fmnist "$V" . "$OUT/store.db" "$OUT/repo" --threads 2 \
  --max-batch 16 --runs 10
"$V" register --store "$OUT/store.db" --list

echo "== 2. start the server in model-less mode"
vr_admin_token "$OUT/admin.token"   # registration/jobs over HTTP need it
"$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 \
  --admin-token-file "$OUT/admin.token" --control-csv "$OUT/control.csv" >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
PORT=$(vr_listen_port "$OUT/serve.log")
echo "listening on port $PORT"

echo "== 3. per-query variant selection"
/usr/bin/python3 - "$DATA/val_inputs.npy" "$OUT" <<'EOF'
import json, sys
import numpy as np
x = np.load(sys.argv[1])[:1]
t = {"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
     "data": x.flatten().tolist()}
for name, p in [("acc90", {"latency_ms": 50, "min_accuracy": 90}),
                ("any", {"latency_ms": 50}),
                ("infeasible", {"latency_ms": 0.001, "min_accuracy": 99})]:
    json.dump({"inputs": [t], "parameters": p}, open(f"{sys.argv[2]}/q_{name}.json", "w"))
EOF
# (Python's urllib rather than curl: one dependency fewer.)
/usr/bin/python3 - "$PORT" "$OUT" <<'EOF'
import sys, urllib.request, urllib.error
for q in ["acc90", "any", "infeasible"]:
    body = open(f"{sys.argv[2]}/q_{q}.json", "rb").read()
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v2/apps/fashion/infer",
                                 data=body, method="POST")
    try:
        with urllib.request.urlopen(req) as r:
            code, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        code, text = e.code, e.read().decode()
    print("%-11s -> [HTTP %d] %s" % (q, code, text.split(',"outputs"')[0][:330]))
EOF

echo "== 4. rising and falling load (SLO ${SLO_MS} ms; phases rate:min_accuracy)"
i=0
for ph in $PHASES; do
  i=$((i + 1))
  r=${ph%%:*}
  acc=${ph##*:}
  "$V" bench --port "$PORT" --app fashion --min-accuracy "$acc" \
    --slo-ms "$SLO_MS" --rate "$r" --duration "$PHASE_S" --binary --connections 256 \
    --input "$DATA/val_inputs.npy" --json >"$OUT/bench_${i}_$ph.json" 2>/dev/null || true
  /usr/bin/python3 -c "
import json,sys; d=json.load(open('$OUT/bench_${i}_$ph.json'))
print('rate %5s qps, accuracy >= %s%%: sent %6d ok %6d 503 %d 504 %d  p99 %8.2f ms  SLO attainment %.4f' % ('$r', '$acc', d['sent'], d['ok'], d['rejected'], d['dropped'], d['p99_us']/1000, d['slo_attainment']))" \
    || echo "phase $ph: no summary (see $OUT/bench_${i}_$ph.json)"
done
sleep 3   # a few idle control periods: the autoscaler scales down

# The live dashboard (GET /dashboard) as a browser sees it now: the whole
# run's history (the page asks for every period at its first poll).
if command -v chromium >/dev/null && [ -f "$(dirname "$V")/web/chart.umd.js" ]; then
  timeout 90 /usr/bin/python3 scripts/dashboard_shot.py "http://127.0.0.1:$PORT/dashboard" 4 \
    "$OUT/dashboard.png" >/dev/null &&
    echo "dashboard screenshot: $OUT/dashboard.png (live at http://127.0.0.1:$PORT/dashboard)"
else
  echo "dashboard screenshot skipped (no chromium, or Chart.js not fetched at build time)"
fi

kill $SERVER; wait $SERVER 2>/dev/null || true
trap - EXIT

echo "== 5. what served, per second ($OUT/control.csv)"
/usr/bin/python3 - "$OUT/control.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("%6s %6s %6s %6s %8s %7s %10s  %s" % ("t_s", "qps", "late", "SLO", "p99ms", "acc%", "cost$/h", "variants (instances)"))
for r in rows:
    if int(r["arrivals"]) == 0 and r["variants"] == "":
        continue
    print("%6.0f %6s %6s %6.3f %8.2f %7.2f %10.4f  %s" % (
        float(r["t_s"]), r["served"], r["late"], float(r["slo_attainment"]),
        float(r["p99_ms"]), float(r["accuracy"]), 3600 * float(r["cost_per_s"]),
        r["variants"]))
served = sum(int(r["served"]) for r in rows)
late = sum(int(r["late"]) for r in rows)
acc = sum(float(r["accuracy"]) * int(r["served"]) for r in rows) / max(served, 1)
cost = sum(float(r["cost_per_s"]) for r in rows)
print("total: served %d, SLO attainment %.4f, mean accuracy %.2f%%, cost $%.5f"
      % (served, 1 - late / max(served, 1), acc, cost))
EOF

if command -v gnuplot >/dev/null; then
  gnuplot <<EOF
set datafile separator ","
set terminal pngcairo size 900,900 noenhanced
set output "$OUT/demo.png"
set multiplot layout 4,1 title "Vario model-less demo: app fashion, SLO ${SLO_MS} ms, phases ${PHASES}"
set key left top
set xlabel "time (s)"
set ylabel "queries/s"
plot "$OUT/control.csv" every ::1 using 1:3 with lines title "served", "" every ::1 using 1:2 with lines title "arrivals"
set ylabel "SLO attainment"
set yrange [0:1.05]
plot "" every ::1 using 1:6 with lines title "on time / served"
set autoscale y
set ylabel "accuracy %"
plot "" every ::1 using 1:(\$3 > 0 ? \$8 : 1/0) with linespoints title "mean accuracy of served"
set ylabel "instances"
set yrange [0:*]
set y2range [0:*]
set y2label "cost \$/h"
set y2tics
plot "" every ::1 using 1:10 with steps title "instances", "" every ::1 using 1:(3600*\$9) axes x1y2 with steps title "cost \$/h"
unset multiplot
EOF
  echo "plot: $OUT/demo.png"
fi
