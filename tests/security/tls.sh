#!/usr/bin/env bash
# `vario serve --tls-cert --tls-key` (GnuTLS through libmicrohttpd) over
# loopback with curl: a throwaway certificate made here with openssl
# (never committed), health and an inference over HTTPS, plain HTTP
# refused on the TLS port. Usage: tls.sh VARIO SOURCE_DIR (77 = skipped)
set -u
vario=$1
src=$2
command -v openssl >/dev/null && command -v curl >/dev/null || { echo "skip: no openssl/curl"; exit 77; }
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null || { echo "FAIL: openssl"; exit 1; }
mkdir -p "$tmp/repo"
cp -r "$src/models/fmnist/fmnist_linear" "$tmp/repo/"
"$vario" serve --repo "$tmp/repo" --port 0 --tls-cert "$tmp/cert.pem" \
  --tls-key "$tmp/key.pem" 2>"$tmp/log" &
pid=$!
. "$src/scripts/lib.sh"
port=$(vr_listen_port "$tmp/log") || {
  if grep -q "no TLS support" "$tmp/log"; then echo "skip: libmicrohttpd without TLS"; exit 77; fi
  echo "FAIL: no listening line"; cat "$tmp/log"; exit 1; }
grep -q "listening on https://" "$tmp/log" || { echo "FAIL: not https"; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/cert.pem" \
  "https://127.0.0.1:$port/v2/health/ready")
[ "$code" = 200 ] || { echo "FAIL: health over TLS: $code"; exit 1; }
body='{"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,28,28],"data":['
body+=$(printf '0,%.0s' $(seq 783))
body+='0]}]}'
out=$(curl -s --cacert "$tmp/cert.pem" -H 'Content-Type: application/json' \
  --data-binary "$body" "https://127.0.0.1:$port/v2/models/fmnist_linear/infer")
echo "$out" | grep -q '"name":"logits"' || { echo "FAIL: infer over TLS: $out"; exit 1; }
# An unverified peer is refused by curl (the certificate is checked) ...
curl -s -o /dev/null "https://127.0.0.1:$port/v2/health/ready" && { echo "FAIL: no verification?"; exit 1; }
# ... and plain HTTP to the TLS port gets no HTTP answer.
plain=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/health/ready")
[ "$plain" = 000 ] || { echo "FAIL: plain HTTP answered $plain"; exit 1; }
kill -TERM $pid
wait $pid
rc=$?
pid=""
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; cat "$tmp/log"; exit 1; }
echo "ok: HTTPS on port $port (health, inference), certificate verified, plain HTTP refused"
