#!/usr/bin/env bash
# A pipeline across processes vs in one (issue 18): the example pipeline
# (models/pipelines/fashion_scenes) under Loki, served by `vario serve
# --store --pipeline-policy loki` (every hop in process) and by `vario
# controller --pipeline-policy loki` + two `vario worker`s + `vario
# frontend` over loopback (the request enters through the front end, runs
# on a worker; hops whose stage that worker does not hold cross to the
# other one). Closed loop, one connection, binary tensors, ROUNDS
# alternating runs of SECS seconds; prints per-run end-to-end p50/p99 and
# the median p50 of each side and their difference.
# Usage: bench/cluster_pipeline.sh [BUILD_DIR]
#   env: ROUNDS (5), SECS (4)
set -euo pipefail
BUILD=${1:-build}
V="$BUILD/vario"
ROUNDS=${ROUNDS:-5}; SECS=${SECS:-4}
P=models/pipelines/fashion_scenes
D=models/fmnist-data
command -v redis-server >/dev/null || { echo "no redis-server" >&2; exit 77; }
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
waitport() { for _ in $(seq 1200); do [ -s "$1" ] && { cat "$1"; return; }; sleep 0.05; done; echo "no port in $1" >&2; exit 1; }
RP=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --dir "$T" >"$T/redis.log" 2>&1 & PIDS+=($!)
R=redis://127.0.0.1:$RP
for _ in $(seq 200); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.05; done
FAST=(--threads 1 --max-batch 1 --runs 5 --precisions fp32 --quiet)
for store in "$T/store.db" "$R"; do   # the same registrations in both stores
  repo="$T/repo"; [ "$store" = "$R" ] && repo="$T/crepo"
  for m in fmnist_linear fmnist_mlp; do
    "$V" register --store "$store" --repo "$repo" --app fashion --model models/fmnist/$m/model.onnx \
      --input $D/val_inputs.npy --labels $D/val_labels.npy "${FAST[@]}"
  done
  for m in fscenes_det_tiny fscenes_det_large; do
    acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$P/$m/config.json'))['accuracy'])")
    "$V" register --store "$store" --repo "$repo" --app fscenes_detect --name $m \
      --model $P/$m/model.onnx --declared-accuracy "$acc" "${FAST[@]}"
  done
done
"$V" serve --repo "$T/repo" --store "$T/store.db" --port 0 --grpc-port -1 --cores 4 \
  --pipeline-policy loki --insecure-admin 2>"$T/serve.log" & PIDS+=($!)
for w in w1 w2; do
  "$V" worker --registry "$R" --store "$R" --repo "$T/crepo" --port 0 --port-file "$T/$w.port" \
    --worker-id $w --heartbeat-ms 300 --insecure-admin 2>"$T/$w.log" & PIDS+=($!)
done
W1=$(waitport "$T/w1.port"); W2=$(waitport "$T/w2.port")
"$V" controller --registry "$R" --repo "$T/crepo" --store "$R" --models - --port 0 \
  --port-file "$T/ctl.port" --period-ms 200 --pipeline-policy loki 2>"$T/ctl.log" & PIDS+=($!)
"$V" frontend --registry "$R" --port 0 --port-file "$T/fe.port" 2>"$T/fe.log" & PIDS+=($!)
SP=$(. scripts/lib.sh; vr_listen_port "$T/serve.log"); FE=$(waitport "$T/fe.port")
"$V" pipeline register $P/pipeline.json --port "$SP" >/dev/null
"$V" pipeline register $P/pipeline.json --port "$FE" >/dev/null   # lands in the Redis store
planned() { curl -sf "localhost:$1/v2/pipelines/fashion_scenes" |
  /usr/bin/python3 -c 'import json,sys; p=json.load(sys.stdin).get("policy",{}); sys.exit(p.get("state")!="planned")'; }
for _ in $(seq 600); do planned $SP && planned $W1 && planned $W2 && break; sleep 0.1; done
bench() { "$V" bench --port "$1" --pipeline fashion_scenes --arrival closed --connections 1 \
            --duration "$2" --binary --payloads 8 --input $P/sample.npy --no-progress --json 2>/dev/null; }
py='import json,sys; d=json.load(sys.stdin); print(d["p50_us"], d["p99_us"], d["ok"], d["sent"])'
for _ in $(seq 100); do   # warm-up until the cluster answers (tables propagated)
  bench $FE 1 | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["ok"] < d["sent"] or not d["ok"])' && break
done
bench $SP 1 >/dev/null
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "placement: $(curl -s localhost:$(cat $T/ctl.port)/v2/cluster/state | /usr/bin/python3 -c 'import json,sys; print({w["id"]: w["models"] for w in json.load(sys.stdin)["workers"]})')"
echo "== fashion_scenes, closed loop, 1 connection, ${SECS}s x $ROUNDS rounds (p50/p99 us, ok/sent)"
: > "$T/a.txt"; : > "$T/b.txt"
for r in $(seq "$ROUNDS"); do
  a=$(bench $SP "$SECS" | /usr/bin/python3 -c "$py")
  b=$(bench $FE "$SECS" | /usr/bin/python3 -c "$py")
  echo "$a" >> "$T/a.txt"; echo "$b" >> "$T/b.txt"
  echo "round $r: one process $a   cluster (front end + 2 workers) $b"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$T/a.txt" "$T/b.txt" <<'PY'
import statistics, sys
a = [float(l.split()[0]) for l in open(sys.argv[1])]
b = [float(l.split()[0]) for l in open(sys.argv[2])]
d = [y - x for x, y in zip(a, b)]
print(f"median p50: one process {statistics.median(a):.1f} us, cluster {statistics.median(b):.1f} us, "
      f"difference (median of paired differences) {statistics.median(d):.1f} us")
PY
