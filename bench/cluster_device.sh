#!/usr/bin/env bash
# The cluster benchmarks of issue 18 on a bigger, quiet machine, with
# nothing installed there: only the vario binary (and the shared libraries
# it links), a redis-server binary, the committed Fashion-MNIST models and
# validation inputs, and bash with coreutils, grep, sed and awk. No python,
# no curl, no network (HTTP checks go through bash's /dev/tcp).
#
#  1. hop overhead: the same model served in process (`vario serve`) and
#     through `vario frontend` -> `vario worker` over loopback; closed
#     loop, 1 connection, binary tensors, ROUNDS alternating runs of SECS
#     seconds; per-run p50/p99, the median p50 of each side and the median
#     of the paired differences (target <= 60 us p50 on top of in-process);
#  2. throughput with 1, 2 and 4 workers behind one front end (closed loop,
#     CONNS connections, MODEL2). With redis-server the workers register
#     in Redis under a `vario controller` and the front end follows the
#     registry's routing table (the deployed data path); each step waits
#     until the front end's table routes to every worker and reports how
#     long that took after the worker was started. Without redis-server:
#     a static table (same data path, no registry).
#  3. routing-table propagation (Redis -> subscriber), when
#     BUILD/bench/bench_cluster_routes exists and redis-server was found.
# With >= 16 cores and taskset present, processes are pinned: bench client
# 0-3, front end 4-5, worker k on cores 6+2(k-1)..7+2(k-1) (the in-process
# server on 6-7, like worker 1); otherwise unpinned (said in the output).
#
# Usage: bench/cluster_device.sh BUILD OUTDIR [REDIS_SERVER]
#   BUILD: directory holding `vario` (as built: BUILD/vario)
#   REDIS_SERVER: path to redis-server (default: found on PATH; none: step
#   2 uses a static table, step 3 is skipped)
#   env: ROUNDS (5), SECS (4), MODEL (fmnist_linear), MODEL2 (fmnist_cnn_s),
#        CONNS (32), TPUT_SECS (8), MAXW (4)
# Run from the repository root (models/ is read from there). Writes
# OUTDIR/summary.txt (also printed), OUTDIR/*.json (each bench run) and
# OUTDIR/logs/. About 2 minutes.
set -euo pipefail
BUILD=${1:?usage: bench/cluster_device.sh BUILD OUTDIR [REDIS_SERVER]}
OUT=${2:?usage: bench/cluster_device.sh BUILD OUTDIR [REDIS_SERVER]}
REDIS=${3:-$(command -v redis-server || true)}
V="$BUILD/vario"
ROUNDS=${ROUNDS:-5}; SECS=${SECS:-4}; MODEL=${MODEL:-fmnist_linear}
MODEL2=${MODEL2:-fmnist_cnn_s}; CONNS=${CONNS:-32}; TPUT_SECS=${TPUT_SECS:-8}
MAXW=${MAXW:-4}
IN=models/fmnist-data/val_inputs.npy
[ -x "$V" ] || { echo "no $V" >&2; exit 2; }
[ -f "$IN" ] && [ -d models/fmnist/"$MODEL" ] || { echo "run from the repository root" >&2; exit 2; }
mkdir -p "$OUT/logs"
T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
S="$OUT/summary.txt"
: > "$S"
say() { echo "$*" | tee -a "$S"; }

# ---- helpers (bash only) ------------------------------------------------------
# HTTP GET through /dev/tcp: prints the body; fails when nothing answers.
http_get() { # PORT PATH: the whole response (head and body)
  ( exec 3<>"/dev/tcp/127.0.0.1/$1"
    printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$2" >&3
    cat <&3 ) 2>/dev/null
}
ready() { # PORT: until /v2/health/ready answers 200
  for _ in $(seq 1200); do
    http_get "$1" /v2/health/ready | head -1 | grep -q ' 200' && return 0
    sleep 0.05
  done
  echo "port $1 never ready" >&2; return 1
}
waitport() { for _ in $(seq 1200); do [ -s "$1" ] && { cat "$1"; return; }; sleep 0.05; done; echo "no port in $1" >&2; exit 1; }
free_port() { # a port nothing listens on (bash only)
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo "no free port" >&2; exit 1
}
# "key":number out of a JSON summary
jnum() { grep -o "\"$1\":[0-9.eE+-]*" | head -1 | cut -d: -f2; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

NCPU=$(nproc)
PIN=0
if [ "$NCPU" -ge 16 ] && command -v taskset >/dev/null; then PIN=1; fi
pin() { # CORES CMD...: pinned when possible
  local c=$1; shift
  if [ "$PIN" = 1 ]; then taskset -c "$c" "$@"; else "$@"; fi
}
spawn() { # LOG CORES CMD...: in the background, pinned when possible; its pid in PIDS
  local log=$1 c=$2; shift 2
  if [ "$PIN" = 1 ]; then taskset -c "$c" "$@" 2>"$log" & else "$@" 2>"$log" & fi
  PIDS+=($!)
}
wcores() { echo "$((6 + 2 * ($1 - 1)))-$((7 + 2 * ($1 - 1)))"; }
bench() { # PORT MODEL CONNS SECS NAME
  pin 0-3 "$V" bench --model "$2" --port "$1" --arrival closed --connections "$3" \
    --duration "$4" --binary --input "$IN" --payloads 64 --no-progress --json \
    2>>"$OUT/logs/bench.log" | tee "$OUT/$5.json"
}

mkdir -p "$T/repo"
cp -r models/fmnist/"$MODEL" models/fmnist/"$MODEL2" "$T/repo/"
say "cluster_device.sh $(date -u +%FT%TZ) on $(uname -n): $NCPU cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
say "pinning: $([ "$PIN" = 1 ] && echo "client 0-3, front end 4-5, worker k 6+2(k-1)..7+2(k-1), in-process server 6-7" || echo "none (< 16 cores or no taskset)")"
say "redis-server: ${REDIS:-none}"

# ---- 1. hop overhead -------------------------------------------------------------
say "== 1. hop overhead: $MODEL, closed loop, 1 connection, ${SECS}s x $ROUNDS rounds"
spawn "$OUT/logs/serve.log" "$(wcores 1)" "$V" serve --repo "$T/repo" --port 0 --grpc-port -1
spawn "$OUT/logs/hop-worker.log" "$(wcores 1)" "$V" worker --repo "$T/repo" --port 0 \
  --port-file "$T/h.port" --id h1 --cores "$(wcores 1)"
SP=""
for _ in $(seq 200); do
  SP=$(sed -n 's/.*listening on https*:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$OUT/logs/serve.log")
  [ -n "$SP" ] && break; sleep 0.05
done
[ -n "$SP" ] || { cat "$OUT/logs/serve.log" >&2; exit 1; }
HW=$(waitport "$T/h.port")
spawn "$OUT/logs/hop-fe.log" 4-5 "$V" frontend --port 0 --port-file "$T/hfe.port" \
  --worker h1=127.0.0.1:$HW
HFE=$(waitport "$T/hfe.port")
ready "$SP"; ready "$HW"; ready "$HFE"
bench "$SP" "$MODEL" 1 1 warm-in >/dev/null; bench "$HFE" "$MODEL" 1 1 warm-fe >/dev/null
: > "$T/a"; : > "$T/b"; : > "$T/d"
for r in $(seq "$ROUNDS"); do
  a=$(bench "$SP" "$MODEL" 1 "$SECS" "hop-in-$r")
  b=$(bench "$HFE" "$MODEL" 1 "$SECS" "hop-fe-$r")
  a50=$(echo "$a" | jnum p50_us); a99=$(echo "$a" | jnum p99_us)
  b50=$(echo "$b" | jnum p50_us); b99=$(echo "$b" | jnum p99_us)
  echo "$a50" >> "$T/a"; echo "$b50" >> "$T/b"
  awk -v x="$a50" -v y="$b50" 'BEGIN {printf "%.1f\n", y - x}' >> "$T/d"
  say "round $r: in-process p50/p99 us $a50 $a99   via front end $b50 $b99"
done
say "median p50: in-process $(median < "$T/a") us, via front end $(median < "$T/b") us," \
    "hop overhead (median of paired differences) $(median < "$T/d") us (target <= 60)"
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
PIDS=()

# ---- 2. throughput, 1..MAXW workers ----------------------------------------------
say "== 2. throughput: $MODEL2, closed loop, $CONNS connections, ${TPUT_SECS}s per step"
RP=""
if [ -n "$REDIS" ]; then
  RP=$(free_port)
  "$REDIS" --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --dir "$T" \
    >"$OUT/logs/redis.log" 2>&1 & PIDS+=($!)
  for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$RP") 2>/dev/null && break; sleep 0.05; done
  URL="redis://127.0.0.1:$RP"
  "$V" controller --registry "$URL" --repo "$T/repo" --models "$MODEL2" --port 0 \
    --port-file "$T/ctl.port" --period-ms 100 2>"$OUT/logs/controller.log" & PIDS+=($!)
  waitport "$T/ctl.port" >/dev/null
  spawn "$OUT/logs/fe.log" 4-5 "$V" frontend --registry "$URL" --port 0 --port-file "$T/fe.port"
  FE=$(waitport "$T/fe.port")
  say "data path: workers registered in Redis, front end following the controller's table"
else
  say "data path: static table (no redis-server)"
fi
WSPEC=()
base=""
for k in $(seq "$MAXW"); do
  t0=$(date +%s.%N)
  wr="$T/w$k-repo"; mkdir -p "$wr"; cp -r "$T/repo/$MODEL2" "$wr/"
  args=(worker --repo "$wr" --port 0 --port-file "$T/w$k.port" --id "w$k" --cores "$(wcores "$k")")
  [ -n "$RP" ] && args+=(--registry "$URL" --heartbeat-ms 500)
  spawn "$OUT/logs/w$k.log" "$(wcores "$k")" "$V" "${args[@]}"
  WP=$(waitport "$T/w$k.port"); ready "$WP"
  WSPEC+=(--worker "w$k=127.0.0.1:$WP")
  if [ -n "$RP" ]; then
    for _ in $(seq 1200); do
      n=$(http_get "$FE" /v2/cluster/routes | grep -o "\"m:$MODEL2\":\[[^]]*\]" | grep -o '"w[0-9]*"' | wc -l || true)
      [ "$n" -ge "$k" ] && break; sleep 0.05
    done
    [ "$n" -ge "$k" ] || { say "front end never routed to $k workers"; exit 1; }
    t1=$(date +%s.%N)
    say "worker w$k started -> in the front end's table after $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s (start, model load and profile, registration, table)"
    port=$FE
  else
    spawn "$OUT/logs/fe$k.log" 4-5 "$V" frontend --port 0 --port-file "$T/fe$k.port" "${WSPEC[@]}"
    port=$(waitport "$T/fe$k.port"); ready "$port"
  fi
  [ "$k" = 1 ] || [ "$k" = 2 ] || [ "$k" = "$MAXW" ] || continue
  bench "$port" "$MODEL2" "$CONNS" 1 "warm-$k" >/dev/null
  r=$(bench "$port" "$MODEL2" "$CONNS" "$TPUT_SECS" "tput-$k")
  q=$(echo "$r" | jnum throughput_qps); p50=$(echo "$r" | jnum p50_us); p99=$(echo "$r" | jnum p99_us)
  [ -n "$base" ] || base=$q
  say "$k worker(s): throughput $q req/s (x$(awk -v a="$q" -v b="$base" 'BEGIN {printf "%.2f", a / b}') of one), p50 $p50 us, p99 $p99 us"
done

# ---- 3. routing-table propagation ---------------------------------------------------
if [ -n "$RP" ] && [ -x "$BUILD/bench/bench_cluster_routes" ]; then
  say "== 3. routing-table propagation (Redis publish -> subscriber callback)"
  "$BUILD/bench/bench_cluster_routes" "$URL" 300 8 2>&1 | tee -a "$S"
else
  say "== 3. routing-table propagation: skipped (needs redis-server and $BUILD/bench/bench_cluster_routes)"
fi
say "done: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
