#!/usr/bin/env bash
# `vario serve` as a process: starts on an ephemeral port with a model of
# the committed repository, answers health, metadata and an inference over
# keep-alive HTTP, then exits 0 on SIGTERM after draining.
# Usage: serve_sigterm.sh VARIO SOURCE_DIR   (exit 77 = skipped)
set -u
vario=$1
src=$2
[ -f "$src/models/fmnist/fmnist_linear/model.onnx" ] || { echo "skip: no models/fmnist"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo"
cp -r "$src/models/fmnist/fmnist_linear" "$tmp/repo/"
"$vario" serve --repo "$tmp/repo" --port 0 2>"$tmp/log" &
pid=$!
. "$src/scripts/lib.sh"
port=$(vr_listen_port "$tmp/log") || { echo "FAIL: no listening line"; kill $pid; exit 1; }

# Raw HTTP/1.1 over bash's /dev/tcp: one connection, two requests.
body='{"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,28,28],"data":['
body+=$(printf '0,%.0s' $(seq 783))
body+='0]}]}'
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n' >&3
printf 'POST /v2/models/fmnist_linear/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "$body" >&3
resp=$(timeout 5 cat <&3 | tr -d '\r' || true)
exec 3<&-
echo "$resp" | grep -q '^HTTP/1.1 200' || { echo "FAIL: health"; echo "$resp"; kill $pid; exit 1; }
echo "$resp" | grep -q '"name":"logits","datatype":"FP32","shape":\[1,10\]' \
  || { echo "FAIL: infer"; echo "$resp"; kill $pid; exit 1; }

kill -TERM $pid
for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then echo "FAIL: still running 10 s after SIGTERM"; kill -KILL $pid; exit 1; fi
wait $pid
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit code $rc"; cat "$tmp/log"; exit 1; }
grep -q "stopped" "$tmp/log" || { echo "FAIL: no 'stopped' in the log"; exit 1; }
echo "ok: port $port, served, drained on SIGTERM"
