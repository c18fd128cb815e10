#!/usr/bin/env bash
# Front end -> remote worker overhead per request (issue 18): the same
# model served in process (`vario serve`) and through `vario frontend`
# forwarding to a `vario worker` over loopback; closed loop, one
# connection, binary tensors, ROUNDS alternating runs of SECS seconds.
# Prints per-run p50/p99 and the median p50 of each side and their
# difference (the hop's cost on top of in-process serving).
# Also: throughput with one worker vs two behind one front end
# (closed loop, CONNS connections, MODEL2).
# Usage: bench/cluster_overhead.sh [BUILD_DIR]
#   env: ROUNDS (5), SECS (4), MODEL (fmnist_linear), MODEL2 (fmnist_cnn_s),
#        CONNS (16), TPUT_SECS (8)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$root/build}
V="$BUILD/vario"
ROUNDS=${ROUNDS:-5}; SECS=${SECS:-4}; MODEL=${MODEL:-fmnist_linear}
MODEL2=${MODEL2:-fmnist_cnn_s}; CONNS=${CONNS:-16}; TPUT_SECS=${TPUT_SECS:-8}
IN=$root/models/fmnist-data/val_inputs.npy
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
waitport() { for _ in $(seq 600); do [ -s "$1" ] && { cat "$1"; return; }; sleep 0.05; done; echo "no port in $1" >&2; exit 1; }
ready() { for _ in $(seq 600); do curl -sf "localhost:$1/v2/health/ready" >/dev/null 2>&1 && return; sleep 0.05; done; }
mkdir -p "$T/repo"
cp -r "$root/models/fmnist/$MODEL" "$root/models/fmnist/$MODEL2" "$T/repo/"
bench() { "$V" bench --model "$2" --port "$1" --arrival closed --connections "$3" \
            --duration "$4" --binary --input "$IN" --payloads 64 --no-progress --json 2>/dev/null; }
"$V" serve --repo "$T/repo" --port 0 --grpc-port -1 2>"$T/serve.log" & PIDS+=($!)
"$V" worker --repo "$T/repo" --port 0 --port-file "$T/w1.port" --id w1 2>"$T/w1.log" & PIDS+=($!)
"$V" worker --repo "$T/repo" --port 0 --port-file "$T/w2.port" --id w2 2>"$T/w2.log" & PIDS+=($!)
SP=$(. "$root/scripts/lib.sh"; vr_listen_port "$T/serve.log")
W1=$(waitport "$T/w1.port"); W2=$(waitport "$T/w2.port")
"$V" frontend --port 0 --port-file "$T/fe.port" --worker w1=127.0.0.1:$W1 2>"$T/fe.log" & PIDS+=($!)
"$V" frontend --port 0 --port-file "$T/fe2.port" --worker w1=127.0.0.1:$W1 --worker w2=127.0.0.1:$W2 2>"$T/fe2.log" & PIDS+=($!)
FE=$(waitport "$T/fe.port"); FE2=$(waitport "$T/fe2.port")
for p in $SP $W1 $W2; do ready $p; done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "== overhead: $MODEL, closed loop, 1 connection, ${SECS}s x $ROUNDS rounds"
py='import json,sys; d=json.load(sys.stdin); print(d["p50_us"], d["p99_us"], d["throughput_qps"])'
: > "$T/in.txt"; : > "$T/fe.txt"
bench $SP $MODEL 1 1 >/dev/null; bench $FE $MODEL 1 1 >/dev/null   # warm-up
for r in $(seq "$ROUNDS"); do
  a=$(bench $SP $MODEL 1 "$SECS" | /usr/bin/python3 -c "$py")
  b=$(bench $FE $MODEL 1 "$SECS" | /usr/bin/python3 -c "$py")
  echo "$a" >> "$T/in.txt"; echo "$b" >> "$T/fe.txt"
  echo "round $r: in-process p50/p99 us ${a% *}   via front end ${b% *}"
done
/usr/bin/python3 - "$T/in.txt" "$T/fe.txt" <<'PY'
import statistics, sys
a = [float(l.split()[0]) for l in open(sys.argv[1])]
b = [float(l.split()[0]) for l in open(sys.argv[2])]
d = [y - x for x, y in zip(a, b)]
print(f"median p50: in-process {statistics.median(a):.1f} us, via front end "
      f"{statistics.median(b):.1f} us, hop overhead (median of paired differences) "
      f"{statistics.median(d):.1f} us")
PY
echo "== throughput: $MODEL2, closed loop, $CONNS connections, ${TPUT_SECS}s"
t1=$(bench $FE $MODEL2 "$CONNS" "$TPUT_SECS" | /usr/bin/python3 -c "$py")
t2=$(bench $FE2 $MODEL2 "$CONNS" "$TPUT_SECS" | /usr/bin/python3 -c "$py")
echo "one worker:  p50 ${t1% * *} us ... throughput ${t1##* } req/s"
echo "two workers: p50 ${t2% * *} us ... throughput ${t2##* } req/s"
