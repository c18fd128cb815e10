#!/usr/bin/env bash
# The cluster demo (issue 18), `make demo-cluster`, loopback only:
#  1. starts redis-server on a free port (the registry);
#  2. registers the Fashion-MNIST models for app "fashion" (as make demo);
#  3. starts `vario controller` with the local worker provider, which
#     starts two `vario worker`s (each pinned to a core, each running the
#     model-less control plane on its core), and one `vario frontend`
#     following the controller's routing table;
#  4. drives model-less load through the front end (`vario bench --app`),
#     kills one worker with SIGKILL in the middle (DEMO_SIGNAL=STOP: stops
#     it, a hung worker), and shows the controller noticing it and the
#     autoscaler (provider) replacing it;
#  5. prints a summary: requests answered / failed explicitly, retries on
#     the surviving worker, and the controller's timeline.
# Usage: scripts/demo_cluster.sh [BUILD_DIR]   (env: VARIO_DEMO_DIR,
#        DEMO_RATE (150 queries/s), DEMO_SECS (24), DEMO_KILL_AT (8),
#        DEMO_SIGNAL (KILL))
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
V="$(cd "$(dirname "$BUILD/vario")" && pwd)/vario"
OUT=${VARIO_DEMO_DIR:-$BUILD/demo-cluster}
RATE=${DEMO_RATE:-150}; SECS=${DEMO_SECS:-24}; KILL_AT=${DEMO_KILL_AT:-8}
SIG=${DEMO_SIGNAL:-KILL}
DATA=models/fmnist-data
"$V" version
rm -rf "$OUT"
mkdir -p "$OUT/workers"
OUT=$(cd "$OUT" && pwd)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitfile() { for _ in $(seq 600); do [ -s "$1" ] && { cat "$1"; return; }; sleep 0.1; done; echo "timed out: $1" >&2; exit 1; }
state() { /usr/bin/python3 -c "import json,sys,urllib.request; d=json.load(urllib.request.urlopen('http://127.0.0.1:$CP/v2/cluster/state')); $1"; }

echo "== 1. redis-server (registry)"
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --dir "$OUT" \
  >"$OUT/redis.log" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.1; done
URL="redis://127.0.0.1:$RP"
echo "redis at $URL"

echo "== 2. register the Fashion-MNIST models for app 'fashion'"
vr_register_fmnist "$V" . "$OUT/store.db" "$OUT/repo" --threads 1 --max-batch 16 --runs 10
"$V" register --store "$OUT/store.db" --list | head -20
vr_admin_token "$OUT/admin.token"

echo "== 3. controller (+ local provider: 2 workers) and a front end"
WARGS=()
for a in --registry "$URL" --repo "$OUT/repo" --store "$OUT/store.db" --port 0 \
         --admin-token-file "$OUT/admin.token" --heartbeat-ms 500; do
  WARGS+=(--worker-arg "$a")
done
"$V" controller --registry "$URL" --repo "$OUT/repo" --models - --port 0 \
  --port-file "$OUT/ctl.port" --admin-token-file "$OUT/admin.token" \
  --provider local --provider-opt "binary=$V" --provider-opt "log-dir=$OUT/workers" \
  --provider-opt share-cores=1 --min-workers 2 --max-workers 3 "${WARGS[@]}" \
  >"$OUT/controller.log" 2>&1 & PIDS+=($!)
CP=$(waitfile "$OUT/ctl.port")
"$V" frontend --registry "$URL" --port 0 --port-file "$OUT/fe.port" \
  >"$OUT/frontend.log" 2>&1 & PIDS+=($!)
FE=$(waitfile "$OUT/fe.port")
for _ in $(seq 600); do
  n=$(state 'print(len(d["workers"]))')
  [ "$n" -ge 2 ] && break; sleep 0.1
done
state '[print("  worker", w["id"], "at", w["addr"], w["meta"]) for w in d["workers"]]'
echo "controller http://127.0.0.1:$CP  front end http://127.0.0.1:$FE"
/usr/bin/python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$FE/v2/cluster/routes').read().decode())"

echo "== 4. ${SECS}s of model-less load at $RATE q/s through the front end; SIG$SIG one worker at ${KILL_AT}s"
"$V" bench --app fashion --min-accuracy 85 --slo-ms 100 --rate "$RATE" --duration "$SECS" \
  --port "$FE" --input "$DATA/val_inputs.npy" --no-progress --json >"$OUT/bench.json" 2>"$OUT/bench.log" &
BENCH=$!
sleep "$KILL_AT"
VICTIM=$(state 'w=d["workers"][0]; import json; print(w["id"], json.loads(w["meta"])["pid"])')
set -- $VICTIM
echo "signalling worker $1 (pid $2) with SIG$SIG at $(date +%T.%N | cut -c1-12)"
T_KILL=$(date +%s.%N)
kill -"$SIG" "$2"
GONE=""; BACK=""
for _ in $(seq 600); do
  ids=$(state 'print(" ".join(sorted(w["id"] for w in d["workers"])))')
  now=$(date +%s.%N)
  case " $ids " in *" $1 "*) ;; *) [ -z "$GONE" ] && GONE=$(/usr/bin/python3 -c "print(round($now - $T_KILL, 2))");; esac
  if [ -n "$GONE" ] && [ "$(echo "$ids" | wc -w)" -ge 2 ]; then BACK=$(/usr/bin/python3 -c "print(round($now - $T_KILL, 2))"); break; fi
  sleep 0.05
done
echo "controller dropped $1 after ${GONE:-?}s; a replacement registered after ${BACK:-?}s"
wait $BENCH || true

echo "== 5. summary"
/usr/bin/python3 - "$OUT/bench.json" "$CP" "$FE" <<'PY'
import json, sys, urllib.request
b = json.load(open(sys.argv[1]))
st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[2]}/v2/cluster/state"))
m = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[3]}/metrics").read().decode()
retries = [l.split()[-1] for l in m.splitlines() if l.startswith("vario_frontend_retries_total")]
print(f"load: sent {b['sent']}, answered 200 {b['ok']}, dropped at their deadline (504) {b['dropped']},"
      f" rejected (503) {b['rejected']}, other errors {b['errors']}, unanswered {b['unfinished']}")
print(f"latency p50 {b['p50_us'] / 1000:.2f} ms, p99 {b['p99_us'] / 1000:.2f} ms, "
      f"SLO attainment {b['slo_attainment']:.4f}")
print(f"front end: requests retried on another worker: {retries[0] if retries else '?'}")
print(f"controller: workers started by the provider {st['workers_started']}, died {st['workers_died']};"
      f" workers now: {', '.join(w['id'] for w in st['workers'])}")
print("controller timeline:")
for e in st["events"]:
    print(f"  {e['t_s']:8.2f}s  {e['what']}")
PY
echo "logs: $OUT (controller.log, frontend.log, workers/)"
