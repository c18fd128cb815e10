#!/usr/bin/env bash
# Serving benchmarks for docs/BENCHMARKS.md ("Serving"), side by side in one
# run: serving overhead at concurrency 1, saturation throughput through the
# server vs engine-only at the same batch size, the front end alone (vario
# bench and wrk), and Gamma CV=4 arrivals at 70% of measured capacity.
#
# Usage: bench/serve.sh [BUILD_DIR] [SECONDS_PER_POINT]
#   BUILD_DIR defaults to build (Release); needs models/fmnist.
# Loopback only; every run is bounded. Prints a markdown report.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
D=${2:-5}
vario=$B/vario
py=/usr/bin/python3
[ -x "$vario" ] || { echo "no $vario (build first)" >&2; exit 1; }
[ -f "$root/models/fmnist/fmnist_cnn_s/model.onnx" ] || {
  echo "models/fmnist missing" >&2; exit 1; }

. "$root/scripts/lib.sh"
vr_scratch_with_server

# Repository: the tiny linear model unbatched (overhead), cnn_s with
# dynamic batching up to 16 (throughput, Gamma).
mkrepo() { # model max_batch delay_us
  mkdir -p "$tmp/repo/$1"
  ln -sf "$root/models/fmnist/$1/model.onnx" "$tmp/repo/$1/model.onnx"
  $py - "$root/models/fmnist/$1/config.json" "$tmp/repo/$1/config.json" "$2" "$3" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["max_batch_size"] = int(sys.argv[3]); c["max_queue_delay_us"] = int(sys.argv[4])
c["instances"] = 1; c["threads"] = 1
json.dump(c, open(sys.argv[2], "w"))
EOF
}
mkrepo fmnist_linear 1 0
mkrepo fmnist_cnn_s 16 1000

vr_admin_token "$tmp/admin.token"
# a port of its own (VR_BENCH_PORT: a fixed one), and this server's, ready
"$vario" serve --repo "$tmp/repo" --port "${VR_BENCH_PORT:-0}" \
  --admin-token-file "$tmp/admin.token" 2>"$tmp/serve.log" &
srv=$!
port=$(vr_listen_port "$tmp/serve.log" "$srv")
vr_wait_ready "$srv" "$port" "$tmp/serve.log"

j() { $py -c "import json,sys; d=json.loads(sys.stdin.read()); print($1)"; }
bench() { "$vario" bench --port "$port" --json "$@"; }
median() { $py -c "import sys,statistics; print('%.1f' % statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

echo "## Serving (bench/serve.sh, $(date -u +%Y-%m-%dT%H:%MZ), ${D}s per point)"
echo
echo "Machine: $(nproc) cores; load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)."
echo

# 1. Overhead at concurrency 1 on the tiny model.
rtt=$(bench --path /v2/health/live --arrival closed --connections 1 --duration "$D" | j 'd["p50_us"]')
bin=$(bench --model fmnist_linear --arrival closed --connections 1 --duration "$D" --binary)
# Server-side overhead of those requests (headers complete -> response
# queued, minus compute), from /metrics: only they have been served so far.
srv_over=$($py -c '
import sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode()
for l in t.splitlines():
    if l.startswith("vario_server_overhead_seconds{quantile=\"0.5\"}"):
        print("%.1f" % (float(l.split()[1]) * 1e6))
' "$port")
jsn=$(bench --model fmnist_linear --arrival closed --connections 1 --duration "$D")
eng=$("$vario" bench --engine "$tmp/repo/fmnist_linear" --batch 1 --duration "$D" --json)
echo "### Serving overhead, concurrency 1, fmnist_linear (15.7 kFLOP)"
echo
echo "| path | e2e p50 us | server compute p50 us | e2e - compute p50 us |"
echo "|---|---|---|---|"
echo "| GET /v2/health/live (transport + client baseline) | $rtt | - | - |"
echo "| infer, binary tensors | $(j 'd["p50_us"]' <<<"$bin") | $(j 'd["compute_p50_us"]' <<<"$bin") | $(j 'd["overhead_p50_us"]' <<<"$bin") |"
echo "| infer, binary, inside the server (headers complete to response queued, minus compute) | - | - | $srv_over |"
echo "| infer, JSON tensors | $(j 'd["p50_us"]' <<<"$jsn") | $(j 'd["compute_p50_us"]' <<<"$jsn") | $(j 'd["overhead_p50_us"]' <<<"$jsn") |"
echo "| engine only, batch 1 (vario bench --engine) | $(j 'd["p50_us"]' <<<"$eng") | - | - |"
echo

# 2. Saturation: engine-only vs server, alternated 5 times (the machine's
# noise is a few percent per round). 8 connections of 16-row requests keep
# a batch queued behind the running one while replies travel.
e16=(); s16=(); s1=()
for _ in 1 2 3 4 5; do
  e16+=("$("$vario" bench --engine "$tmp/repo/fmnist_cnn_s" --batch 16 --duration "$D" --json | j 'd["rows_per_s"]')")
  s16+=("$(bench --model fmnist_cnn_s --arrival closed --connections 8 --batch 16 --binary --duration "$D" | j 'd["throughput_qps"]*16')")
  s1+=("$(bench --model fmnist_cnn_s --arrival closed --connections 64 --binary --duration "$D" | j 'd["throughput_qps"]')")
done
me=$(median "${e16[@]}"); ms16=$(median "${s16[@]}"); ms1=$(median "${s1[@]}")
echo "### Saturation throughput, fmnist_cnn_s, batch 16 (median of 5 alternated rounds)"
echo
echo "| setup | rows/s | rounds | vs engine only |"
echo "|---|---|---|---|"
echo "| engine only, batch 16 | $me | ${e16[*]} | 1.00 |"
echo "| server, requests of 16 rows, 8 connections | $ms16 | ${s16[*]} | $($py -c "print('%.2f' % ($ms16/$me))") |"
echo "| server, 1-row requests batched dynamically (max 16), 64 connections | $ms1 | ${s1[*]} | $($py -c "print('%.2f' % ($ms1/$me))") |"
echo

# 3. Front end alone.
fe=$(bench --path /v2/health/live --arrival closed --connections 32 --duration "$D" | j 'd["throughput_qps"]')
wrk_rps="(wrk not installed)"
if command -v wrk >/dev/null; then
  wrk_rps=$(wrk -t1 -c32 -d"${D}s" "http://127.0.0.1:$port/v2/health/live" | awk '/Requests\/sec/ {print $2}')
fi
echo "### Front end alone (GET /v2/health/live, keep-alive, 32 connections)"
echo
echo "| client | req/s |"
echo "|---|---|"
echo "| vario bench --arrival closed --connections 32 | $fe |"
echo "| wrk -t1 -c32 | $wrk_rps |"
echo

# 4. Gamma CV=4 at 70% of the dynamic-batching capacity, without and with
# the SLO sent as the request timeout (deadline-aware batching + early drop).
rate=$($py -c "print('%.0f' % (0.7*$ms1))")
slo=25
echo "### Gamma CV=4 arrivals at 70% load ($rate req/s of 1 row), SLO $slo ms, fmnist_cnn_s"
echo
echo "| deadlines sent | sent | p50 ms | p99 ms | p99.9 ms | SLO attainment | early drops |"
echo "|---|---|---|---|---|---|---|"
for mode in no yes; do
  extra=""; [ $mode = yes ] && extra="--send-timeout"
  g=$(bench --model fmnist_cnn_s --arrival gamma --cv 4 --rate "$rate" --slo-ms "$slo" --binary --duration "$((D*2))" --connections 256 $extra)
  echo "| $mode | $(j 'd["sent"]' <<<"$g") | $(j '"%.2f"%(d["p50_us"]/1e3)' <<<"$g") | $(j '"%.2f"%(d["p99_us"]/1e3)' <<<"$g") | $(j '"%.2f"%(d["p999_us"]/1e3)' <<<"$g") | $(j 'd["slo_attainment"]' <<<"$g") | $(j 'd["early_drop_rate"]' <<<"$g") |"
done
echo
echo "Load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)."
