#!/bin/sh
# Metadata writes and routing propagation, SQLite vs Redis (issue 18).
#   bench/registry.sh [BUILD_DIR] [registry_bench options...]   (default: build)
# Starts a private redis-server (loopback, random free port, persistence
# off, as the tests do), runs bench_registry_bench against it and a SQLite
# file in the same temporary directory, then stops the server.
# REDIS_FSYNC=always runs Redis with an append-only file fsynced on every
# write (durability like SQLite's default); the default is no persistence,
# as the tests run it.
set -e
BUILD=${1:-build}
[ $# -gt 0 ] && shift
BIN="$BUILD/bench/bench_registry_bench"
[ -x "$BIN" ] || { echo "registry.sh: build first ($BIN missing)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "registry.sh: redis-server missing (scripts/setup-deps.sh bench)" >&2; exit 1; }
TMP=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if [ "${REDIS_FSYNC:-}" = always ]; then PERSIST="--appendonly yes --appendfsync always"
else PERSIST="--appendonly no"; fi
# shellcheck disable=SC2086
redis-server --port "$PORT" --bind 127.0.0.1 --save "" $PERSIST --dir "$TMP" \
  --daemonize no >"$TMP/redis.log" 2>&1 &
RPID=$!
trap 'kill $RPID 2>/dev/null; wait $RPID 2>/dev/null; rm -rf "$TMP"' EXIT
i=0
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 100 ] || { cat "$TMP/redis.log" >&2; exit 1; }; sleep 0.05
done
echo "# redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$PORT ($PERSIST); SQLite file in $TMP ($(df -T "$TMP" | awk 'NR==2{print $2}'))"
"$BIN" --redis "redis://127.0.0.1:$PORT" --sqlite "$TMP/store.db" "$@"
