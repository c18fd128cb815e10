#!/usr/bin/env bash
# Routing-table propagation through Redis (issue 18): starts redis-server on
# a free loopback port and runs bench_cluster_routes (N tables of W
# workers). Usage: bench/cluster_routes.sh [BUILD_DIR] [N] [W]
set -euo pipefail
BUILD=${1:-build}; N=${2:-300}; W=${3:-8}
P=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
T=$(mktemp -d)
redis-server --port "$P" --bind 127.0.0.1 --save "" --appendonly no --dir "$T" >"$T/redis.log" 2>&1 &
R=$!
trap 'kill $R 2>/dev/null; wait $R 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do redis-cli -p "$P" ping >/dev/null 2>&1 && break; sleep 0.1; done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
"$BUILD/bench/bench_cluster_routes" "redis://127.0.0.1:$P" "$N" "$W"
