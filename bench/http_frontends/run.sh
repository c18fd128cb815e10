#!/usr/bin/env bash
# Compares the two candidate HTTP front-end libraries with the same
# keep-alive hello-world workload: wrk -t1 -c32 for DURATION seconds over
# loopback, each server on one event-loop thread (plus MHD with a pool of 2).
# Usage: bench/http_frontends/run.sh [DURATION_S]   (prints a markdown table)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dur=${1:-5}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/hello_libevent" "$here/hello_libevent.c" $(pkg-config --cflags --libs libevent)
cc -O2 -o "$tmp/hello_mhd" "$here/hello_mhd.c" $(pkg-config --cflags --libs libmicrohttpd)

measure() { # name port cmd...
  local name=$1 port=$2; shift 2
  "$@" & local pid=$!
  sleep 0.3
  local out
  out=$(wrk -t1 -c32 -d"${dur}s" --latency "http://127.0.0.1:$port/v2/health/live")
  kill $pid; wait $pid 2>/dev/null || true
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  printf '| %s | %s | %s | %s |\n' "$name" "$rps" "$p50" "$p99"
}
echo "| server | req/s | p50 | p99 |"
echo "|---|---|---|---|"
measure "libevent evhttp, 1 thread" 18801 "$tmp/hello_libevent" 18801
measure "libmicrohttpd epoll, 1 thread" 18802 "$tmp/hello_mhd" 18802 1
measure "libmicrohttpd epoll, pool of 2" 18803 "$tmp/hello_mhd" 18803 2
