#!/usr/bin/env bash
# Load shedding by default (issue 12, item 5): open-loop Poisson arrivals at
# ~3x the measured capacity on POST /v2/models/{m}/infer, the client sending
# NO timeout. Three configs of the same model (fmnist_cnn_s, 1 instance, 1
# thread, dynamic batching up to 16):
#   none      queue_policy default_timeout_microseconds 0  (the old behaviour)
#   default   no queue_policy: the default 100 ms timeout, REJECT
#   20ms      default_timeout_microseconds 20000
# Prints a markdown table: 503/504 counts and the served p50/p99.
# Usage: bench/overload_shedding.sh [BUILD_DIR] [SECONDS]   (loopback)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
D=${2:-8}
vario=$B/vario
py=/usr/bin/python3
. "$root/scripts/lib.sh"
vr_scratch_with_server
mk() { # name policy-json-or-empty
  mkdir -p "$tmp/repo/$1"
  ln -sf "$root/models/fmnist/fmnist_cnn_s/model.onnx" "$tmp/repo/$1/model.onnx"
  $py - "$root/models/fmnist/fmnist_cnn_s/config.json" "$tmp/repo/$1/config.json" "$1" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(name=sys.argv[3], max_batch_size=16, max_queue_delay_us=1000, instances=1, threads=1)
if sys.argv[4]:
    c["queue_policy"] = json.loads(sys.argv[4])
json.dump(c, open(sys.argv[2], "w"))
PY
}
mk cnn_none '{"default_timeout_microseconds":0}'
mk cnn_default ''
mk cnn_20ms '{"default_timeout_microseconds":20000}'
"$vario" serve --repo "$tmp/repo" --port 0 2>"$tmp/serve.log" &
srv=$!
port=$(vr_listen_port "$tmp/serve.log")
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/v2/models/cnn_20ms/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
j() { $py -c "import json,sys; d=json.loads(sys.stdin.read()); print($1)"; }
cap=$("$vario" bench --port "$port" --model cnn_default --arrival closed --connections 64 \
  --binary --duration "$D" --json | j 'd["throughput_qps"]')
rate=$($py -c "print('%.0f' % (3*$cap))")
echo "## Load shedding by default (bench/overload_shedding.sh, $(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "Machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg). fmnist_cnn_s,"
echo "1 instance x 1 thread, dynamic batching <= 16; capacity (closed loop, 64"
echo "connections) $cap req/s; offered $rate req/s Poisson (3x) for ${D} s, 1000"
echo "connections, binary tensors, **no client timeout**."
echo
echo "Served latency twice: as the client saw it (from the scheduled send time,"
echo "so it includes the load generator's own backlog when it cannot keep up) and"
echo "inside the server (runtime arrival to answer, /v2/models/{m}/stats)."
echo
echo "| queue policy | sent | served | 503 | 504 | client p50 / p99 ms | server p50 / p99 ms |"
echo "|---|---|---|---|---|---|---|"
for m in cnn_none cnn_default cnn_20ms; do
  r=$("$vario" bench --port "$port" --model "$m" --arrival poisson --rate "$rate" \
    --connections 1000 --binary --duration "$D" --json 2>/dev/null)
  case $m in
    cnn_none) label="none (default_timeout 0: the old behaviour)" ;;
    cnn_default) label="default (100 ms, REJECT)" ;;
    cnn_20ms) label="default_timeout 20 ms" ;;
  esac
  st=$(curl -s "http://127.0.0.1:$port/v2/models/$m/stats")
  echo "| $label | $(j 'd["sent"]' <<<"$r") | $(j 'd["ok"]' <<<"$r") | $(j 'd["rejected"]' <<<"$r") | $(j 'd["dropped"]' <<<"$r") | $(j '"%.1f / %.1f" % (d["p50_us"]/1000, d["p99_us"]/1000)' <<<"$r") | $(j '"%.1f / %.1f" % (d["model_stats"][0]["vario"]["p50_us"]/1000, d["model_stats"][0]["vario"]["p99_us"]/1000)' <<<"$st") |"
  sleep 2 # let the queue of the previous run drain
done
