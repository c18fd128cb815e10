#!/usr/bin/env bash
# Validation of the simulator against the live server (issue 7): the same
# workloads on `vario serve` (driven by `vario bench`) and in `vario sim`,
# with a cluster that mirrors the live setup.
#
# Usage: bench/sim_validate.sh [BUILD_DIR] [SECONDS]
#   BUILD_DIR defaults to build (Release); SECONDS per workload (default 20).
#
# 1. Profiles fmnist_resnet (fp32, 1 thread, max batch 16) with
#    `vario register` into a temporary store/repository (a few seconds).
# 2. Live: `vario serve --repo` with that model, 1 instance, 1 thread, max
#    batch 16, max_queue_delay_us 0 (the simulator's batching is
#    work-conserving: an idle instance takes what is queued, up to max batch),
#    requests carry their deadline (--send-timeout) so the server early-drops
#    like the simulator. `vario bench` sends binary 1-row requests over 64
#    connections (with the default 16, at most 16 requests are in flight:
#    one batch of 16 leaves the engine idle while its replies return and the
#    client queues -- a limit the simulator does not have).
# 3. Sim: experiments/validation/*.json (1 worker, clipper baseline with the
#    same fixed variant and instance count, "batching": "runtime") with the
#    profile just measured; also once with the default greedy batching.
# Prints a markdown table: live vs sim SLO violation rate, p50, p99,
# throughput, instances, and the differences. Loopback only; ~1.5 minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
D=${2:-20}
vario=$B/vario
py=/usr/bin/python3
exp=$root/experiments/validation
m=fmnist_resnet
var=$m-fp32-t1-b16
[ -x "$vario" ] || { echo "no $vario (build first)" >&2; exit 1; }
[ -f "$root/models/fmnist/$m/model.onnx" ] || { echo "models/fmnist missing" >&2; exit 1; }

. "$root/scripts/lib.sh"
vr_scratch_with_server

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# 1. Measured profile.
"$vario" register --store "$tmp/db" --repo "$tmp/reg" --app fashion \
  --model "$root/models/fmnist/$m/model.onnx" --name $m \
  --input "$root/models/fmnist-data/val_inputs.npy" \
  --labels "$root/models/fmnist-data/val_labels.npy" \
  --precisions fp32 --threads 1 --max-batch 16 --runs 200 --quiet
prof=$tmp/reg/$m/profiles/$var.json
[ -f "$prof" ] || { echo "no profile $prof" >&2; exit 1; }

# 2. Live repository: the registered model, one fixed instance.
mkdir -p "$tmp/repo/$m"
cp "$tmp/reg/$m/model.onnx" "$tmp/repo/$m/model.onnx"
$py - "$tmp/reg/$m/config.json" "$tmp/repo/$m/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(max_batch_size=16, max_queue_delay_us=0, instances=1, threads=1, precision="fp32")
json.dump(c, open(sys.argv[2], "w"))
EOF
vr_admin_token "$tmp/admin.token"
# a port of its own (VR_BENCH_PORT: a fixed one), and this server's, ready
"$vario" serve --repo "$tmp/repo" --port "${VR_BENCH_PORT:-0}" \
  --admin-token-file "$tmp/admin.token" 2>"$tmp/serve.log" &
srv=$!
port=$(vr_listen_port "$tmp/serve.log" "$srv")
vr_wait_ready "$srv" "$port" "$tmp/serve.log"
# Warm-up (plans for every batch size), not recorded.
"$vario" bench --port "$port" --model $m --binary --arrival poisson --rate 5000 \
  --duration 2 --slo-ms 20 --send-timeout --seed 99 --json >/dev/null

# Per-request server overhead outside the engine run, from a closed-loop
# saturation run: 1/throughput - p50(16)/16 (calibration, not the workloads).
sat=$("$vario" bench --port "$port" --model $m --binary --arrival closed \
  --connections 32 --duration 3 --json)
ovh=$($py -c '
import json, sys
d = json.loads(sys.argv[1]); p = json.load(open(sys.argv[2]))
print("%.1f" % max(0.0, 1e6 / d["throughput_qps"] - p["p50_ms"][4] * 1e3 / 16))' "$sat" "$prof")
sat_qps=$($py -c 'import json,sys; print(json.loads(sys.argv[1])["throughput_qps"])' "$sat")

echo "## Sim vs live (bench/sim_validate.sh, $(date -u +%Y-%m-%dT%H:%MZ), ${D}s per workload)"
echo
echo "Machine: $(nproc) cores; load average before: $load0."
$py - "$prof" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
print("Profile %s: p50 b1 %.3f ms, b16 %.3f ms (p99 %.3f ms); saturation %.0f rows/s."
      % (p["variant"], p["p50_ms"][0], p["p50_ms"][4], p["p99_ms"][4], 16 / p["p50_ms"][4] * 1e3))
EOF
echo "Live closed-loop saturation (32 connections): $sat_qps req/s -> request_overhead_us = $ovh."
echo
for w in poisson50 poisson90 gamma_cv4; do
  cfg=$exp/$w.json
  args=$($py -c '
import json, sys
w = json.load(open(sys.argv[1]))["workloads"][0]
a = "--arrival %s --rate %g --slo-ms %g" % (w["kind"], w["rate"], w["slo_ms"])
if "cv" in w: a += " --cv %g" % w["cv"]
print(a)' "$cfg")
  # shellcheck disable=SC2086
  "$vario" bench --port "$port" --model $m --binary $args --duration "$D" \
    --connections 64 --send-timeout --seed 1 --csv "$tmp/$w.live.csv" --json >"$tmp/$w.live.json"
  inst=$(curl -sf "http://127.0.0.1:$port/metrics" |
    awk '/^vario_instances\{/ && /ready|active/ {s += $2} END {print s + 0}')
  echo "$inst" >"$tmp/$w.inst"
  mkdir -p "$tmp/sim"
  cp "$prof" "$tmp/sim/$var.json"
  # Three simulator settings: the config as committed (runtime batching) plus
  # the measured per-request overhead (the reported one), the config as is,
  # and the simulator's default greedy batching without overhead (before).
  for k in final batch greedy; do
    $py - "$cfg" "$tmp/sim/$w.$k.json" "$k" "$ovh" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))
if sys.argv[3] == "final": c["request_overhead_us"] = float(sys.argv[4])
if sys.argv[3] == "greedy": c["batching"] = "greedy"
json.dump(c, open(sys.argv[2], "w"))
EOF2
    "$vario" sim --config "$tmp/sim/$w.$k.json" --duration "$D" --output "$tmp/$w.$k" --quiet
  done
done
uptime_after=$(cut -d' ' -f1-3 /proc/loadavg)

$py - "$tmp" "$D" <<'EOF'
import json, sys
t = sys.argv[1]
D = float(sys.argv[2])
print("| workload | metric | live | sim | sim - live | rel. | sim, no overhead | sim, greedy, no overhead |")
print("|---|---|---|---|---|---|---|---|")
for w in ["poisson50", "poisson90", "gamma_cv4"]:
    L = json.load(open("%s/%s.live.json" % (t, w)))
    S = json.load(open("%s/%s.final.json" % (t, w)))
    A = json.load(open("%s/%s.batch.json" % (t, w)))
    G = json.load(open("%s/%s.greedy.json" % (t, w)))
    inst = float(open("%s/%s.inst" % (t, w)).read())
    sent = L["sent"]
    lv = 1 - L["slo_attainment"]
    m = [("SLO violation %", lv * 100, True, lambda X: X["slo_violation_rate"] * 100),
         ("p50 ms", L["p50_us"] / 1e3, False, lambda X: X["latency_p50_ms"]),
         ("p99 ms", L["p99_us"] / 1e3, False, lambda X: X["latency_p99_ms"]),
         ("goodput req/s", L["slo_attainment"] * sent / D, False, lambda X: X["throughput_qps"]),
         ("instances", inst, False, lambda X: X["mean_instances"])]
    for name, a, pts, f in m:
        b, ab, g = f(S), f(A), f(G)
        diff = ("%+.2f pt" % (b - a)) if pts else ("%+.3g" % (b - a))
        rel = ("%+.1f%%" % ((b - a) / a * 100)) if a else "-"
        print("| %s | %s | %.3g | %.3g | %s | %s | %.3g | %.3g |" % (w, name, a, b, diff, rel, ab, g))
    print("| %s | requests (live sent / sim demand) | %d | %d | | | | |" % (w, sent, S["demand"]))
    print("| %s | live: 504 dropped / unfinished / compute p50 us / overhead p50 us | %d / %d / %.0f / %.0f | | | | | |"
          % (w, L["dropped"], L["unfinished"], L["compute_p50_us"], L["overhead_p50_us"]))
EOF
echo
echo "Load average after: $uptime_after."
