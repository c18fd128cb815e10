#!/bin/sh
# `vario cluster` and `--store redis://` end to end against a private
# redis-server (loopback, free port): a routing table written from the CLI
# reaches a watcher, reads back with its version, compare-and-set refuses a
# stale version; models registered into Redis are listed by another
# process; bad URLs are clear errors. Exit 77 when redis-server is absent.
# Usage: cluster_cli.sh path/to/vario source_dir
set -u
VARIO=$1
SRC=$2
command -v redis-server >/dev/null || { echo "redis-server not installed: skipped"; exit 77; }
T=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T" \
  --daemonize no >"$T/redis.log" 2>&1 &
RPID=$!
WPID=
trap 'kill $RPID $WPID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; cat "$T/watch.out" 2>/dev/null; exit 1; }
U=redis://127.0.0.1:$PORT
i=0
until "$VARIO" cluster --redis "$U" workers >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "redis-server did not start"; sleep 0.05
done

"$VARIO" cluster --registry "$U" workers > "$T/w.out" || fail "workers"
[ "$(wc -l < "$T/w.out")" -eq 1 ] || fail "expected only the header: $(cat "$T/w.out")"

"$VARIO" cluster --registry "$U" watch --count 2 --duration 20 > "$T/watch.out" &
WPID=$!
i=0
until grep -q '^connected' "$T/watch.out" 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 200 ] || fail "watch did not connect"; sleep 0.05
done
echo '{"routes":{"a:fashion":["w1"]}}' | "$VARIO" cluster --redis "$U" put-routes fashion - \
  > "$T/put.out" || fail "put-routes"
grep -qx 'version 1' "$T/put.out" || fail "first version: $(cat "$T/put.out")"
printf '{"routes":{}}' > "$T/r2.json"
"$VARIO" cluster --redis "$U" put-routes fashion "$T/r2.json" --expect 1 > "$T/put.out" \
  || fail "put-routes --expect 1"
grep -qx 'version 2' "$T/put.out" || fail "second version"
"$VARIO" cluster --redis "$U" put-routes fashion "$T/r2.json" --expect 1 2> "$T/err" \
  && fail "stale --expect accepted"
grep -q "at version 2, not 1" "$T/err" || fail "stale message: $(cat "$T/err")"
wait $WPID || fail "watch exit"
WPID=
grep -q '^routes fashion v1 {"routes":{"a:fashion":\["w1"\]}}' "$T/watch.out" || fail "watch v1"
grep -q '^routes fashion v2 {"routes":{}}' "$T/watch.out" || fail "watch v2"
"$VARIO" cluster --redis "$U" routes fashion > "$T/get.out" || fail "routes"
[ "$(head -1 "$T/get.out")" = "version 2" ] || fail "routes version"
"$VARIO" cluster --redis "$U" routes nothing 2> "$T/err" && fail "missing table found"
grep -q "no routing table 'nothing'" "$T/err" || fail "missing table message"
"$VARIO" cluster --registry "$U" instances nobody > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] || fail "instances of a worker not in the registry: exit $rc"
grep -q "no live worker 'nobody'" "$T/err" || fail "missing worker message: $(cat "$T/err")"

# The metadata store in the same Redis (db 1), seen by another process.
"$VARIO" register --store "$U/1" --repo "$T/repo" --app fashion \
  --model "$SRC/models/fmnist/fmnist_mlp/model.onnx" --declared-accuracy 85 \
  --threads 1 --max-batch 2 --runs 2 --quiet > /dev/null || fail "register into redis"
"$VARIO" register --store "$U/1" --list > "$T/list.out" || fail "list"
grep -q '^fmnist_mlp  *fashion  *85.00%  *2 ' "$T/list.out" || fail "list: $(cat "$T/list.out")"
"$VARIO" register --store "$U/1" --repo "$T/repo" --app fashion \
  --model "$SRC/models/fmnist/fmnist_mlp/model.onnx" --declared-accuracy 85 --quiet \
  2> "$T/err" && fail "duplicate registration accepted"
grep -q "already registered" "$T/err" || fail "duplicate message: $(cat "$T/err")"
"$VARIO" register --store "$U/1" --remove fmnist_mlp > /dev/null || fail "remove"
"$VARIO" register --store "$U/1" --list > "$T/list.out" || fail "list after remove"
grep -q fmnist_mlp "$T/list.out" && fail "removed model still listed"

# Clear errors.
"$VARIO" cluster --redis "redis://127.0.0.1:0" workers 2> "$T/err"; [ $? -eq 2 ] || fail "bad port exit"
grep -q "port must be 1..65535" "$T/err" || fail "bad port message"
"$VARIO" cluster --redis "$U" frobnicate 2> /dev/null; [ $? -eq 2 ] || fail "bad command exit"
"$VARIO" cluster workers 2> "$T/err"; [ $? -eq 2 ] || fail "missing --registry exit"
grep -q -- "--registry URL is required" "$T/err" || fail "missing --registry message: $(cat "$T/err")"
echo "cluster_cli: ok"
