#!/usr/bin/env bash
# Model-less overload (docs/BENCHMARKS.md, "Model-less overload"): registers
# the Fashion-MNIST models for app "fashion" as the demo does, starts
# `vario serve --store`, warms the app up for 3 s at a rate it can serve,
# then drives about 2x what the server can serve:
#
#   vario bench --app fashion --min-accuracy 92 --slo-ms 10 --rate 12000 \
#     --duration 8 --connections 64
#
# and prints the bench summary (JSON) plus the server's request outcomes
# (vario_requests_total), the control plane's late count, and how late each
# 200 was handed to HTTP beyond its deadline in units of the execution time
# of its batch (vario_app_lateness_batches: le="1" is "within deadline + one
# batch"; vario_app_late_beyond_batch_total says why any were later;
# vario_app_lateness_max_seconds the worst).
#
# Usage: bench/overload_apps.sh [BUILD_DIR] [RATE] [SERVER_VARIO]
#   BUILD_DIR defaults to build (Release); its vario is the load generator.
#   SERVER_VARIO: another vario to register and serve with (e.g. an older
#   build, for a before/after with the same client). Loopback only, bounded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
RATE=${2:-12000}
V=$B/vario
S=${3:-$V}
[ -x "$V" ] && [ -x "$S" ] || { echo "no $V or $S (build first)" >&2; exit 1; }
. "$root/scripts/lib.sh"
vr_scratch_with_server

vr_register_fmnist "$S" "$root" "$tmp/store.db" "$tmp/repo" --threads 2 \
  --max-batch 16 --runs 10
"$S" serve --repo "$tmp/repo" --store "$tmp/store.db" --port 0 \
  >"$tmp/serve.log" 2>&1 &
srv=$!
port=$(vr_listen_port "$tmp/serve.log")
"$V" bench --port "$port" --app fashion --min-accuracy 92 --slo-ms 10 \
  --rate 500 --duration 3 --connections 64 >/dev/null 2>&1 || true
echo "== vario bench --app fashion --min-accuracy 92 --slo-ms 10 --rate $RATE --duration 8 --connections 64"
"$V" bench --port "$port" --app fashion --min-accuracy 92 --slo-ms 10 \
  --rate "$RATE" --duration 8 --connections 64 --json
/usr/bin/python3 - "$port" <<'PY'
import sys, urllib.request
t = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=30).read().decode()
for line in t.splitlines():
    if line.startswith(("vario_requests_total", "vario_app_slo_violations_total",
                        "vario_app_lateness", "vario_app_late_beyond_batch_total")):
        print(line)
PY
