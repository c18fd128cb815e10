#!/usr/bin/env bash
# Validation of the simulator against the live server with the INFaaS
# policy deciding (issue 7; bench/sim_validate.sh does the same with a
# fixed instance): the same phases of app queries on `vario serve --store`
# and in `vario sim`, both running src/policy, compared second by second.
#
# Usage: bench/sim_validate_infaas.sh [BUILD_DIR] [SECONDS_PER_PHASE]
#   BUILD_DIR defaults to build (Release); SECONDS_PER_PHASE default 10.
#
# 1. Registers the five Fashion-MNIST models for app "fashion" (fp32,
#    1 thread, max batch 1..16: 25 variants) into a temporary store.
# 2. Live: `vario serve --store` on the default 2-core worker; `vario bench
#    --app` drives Poisson phases RATE:MIN_ACCURACY (SLO 20 ms, binary,
#    64 connections); the control loop writes its per-second CSV.
# 3. Sim: one 2-core worker that cannot grow (as live), the INFaaS policy
#    with the live defaults (backlog_step 1.25), the 25 measured profiles,
#    one Poisson workload per phase (start_s/end_s).
# Prints per phase: the variants that held instances (instance-seconds),
# when the phase's final variant set was reached, SLO violations, p99 and
# accuracy, live vs sim (costs are billed differently: live per instance,
# the simulator per worker); and the share of seconds whose variant
# sets agree. Loopback only; about 20 s + 2 x phases.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
D=${2:-10}
PHASES=${VALIDATE_PHASES:-"300:85 300:92 2000:92 300:88 50:85"}
vario=$B/vario
py=/usr/bin/python3
data=$root/models/fmnist-data
[ -x "$vario" ] || { echo "no $vario (build first)" >&2; exit 1; }

. "$root/scripts/lib.sh"
vr_scratch_with_server

load0=$(cut -d' ' -f1-3 /proc/loadavg)
vr_register_fmnist "$vario" "$root" "$tmp/db" "$tmp/repo" --precisions fp32 \
  --threads 1 --max-batch 16 --runs 50

vr_admin_token "$tmp/admin.token"
"$vario" serve --repo "$tmp/repo" --store "$tmp/db" --port 0 \
  --admin-token-file "$tmp/admin.token" --control-csv "$tmp/live.csv" >"$tmp/serve.log" 2>&1 &
srv=$!
port=$(vr_listen_port "$tmp/serve.log")
# The control loop's clock starts with the server; phases start now.
t_start=$($py -c 'import time; print(time.monotonic())')
i=0
for ph in $PHASES; do
  "$vario" bench --port "$port" --app fashion --min-accuracy "${ph##*:}" \
    --slo-ms 20 --rate "${ph%%:*}" --duration "$D" --binary --connections 64 \
    --input "$data/val_inputs.npy" --seed $((i + 1)) --json >"$tmp/live_$i.json" || true
  i=$((i + 1))
done
t_end=$($py -c 'import time; print(time.monotonic())')
sleep 2
kill -INT "$srv"; wait "$srv" 2>/dev/null || true; srv=""

# The simulator's config: the live worker, policy defaults and phases.
$py - "$tmp" "$D" "$PHASES" <<'EOF'
import glob, json, os, sys
t, D, phases = sys.argv[1], float(sys.argv[2]), sys.argv[3].split()
profs = sorted(glob.glob(os.path.join(t, "repo", "*", "profiles", "*.json")))
wl = []
for i, ph in enumerate(phases):
    rate, acc = ph.split(":")
    wl.append({"kind": "poisson", "rate": float(rate), "app": "fashion",
               "slo_ms": 20, "min_accuracy": float(acc),
               "start_s": i * D, "end_s": (i + 1) * D})
cfg = {"name": "INFaaS live validation", "duration_s": len(phases) * D + 2,
       "warmup_s": 0, "tick_s": 1, "seed": 1, "noise": True,
       "batching": "runtime", "profiles": profs,
       "warm_start": False,  # live loads on the first query, cold
       "workers": [{"name": "cpu", "cores": 2, "mem_gb": 8,
                    "price_per_s": 2 * 0.0425 / 3600, "start_s": 0,
                    "initial": 1, "max": 1}],
       "policy": {"name": "infaas", "backlog_step": 1.25},
       "workloads": wl}
json.dump(cfg, open(os.path.join(t, "sim.json"), "w"), indent=1)
EOF
mkdir -p "$tmp/out"
"$vario" sim --config "$tmp/sim.json" --output "$tmp/out/sim" --quiet

echo "## Sim vs live, INFaaS deciding (bench/sim_validate_infaas.sh, $(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "Machine: $(nproc) cores; load average before: $load0. Phases (rate:min accuracy, ${D} s each): $PHASES; SLO 20 ms."
echo
$py - "$tmp" "$D" "$PHASES" <<'EOF'
import csv, json, sys
from collections import defaultdict
t, D, phases = sys.argv[1], float(sys.argv[2]), sys.argv[3].split()

def live_rows():
    out = {}
    for r in csv.DictReader(open(t + "/live.csv")):
        s = int(round(float(r["t_s"])))
        v = {}
        for x in r["variants"].split():
            name, k = x.rsplit("*", 1)
            v[name] = int(k)
        out[s] = (v, float(r["accuracy"]), float(r["cost_per_s"]))
    return out

def sim_rows():
    inst = defaultdict(dict)
    for r in csv.DictReader(open(t + "/out/sim.instances.csv")):
        inst[int(round(float(r["t_s"])))][r["variant"]] = int(r["instances"])
    rows = {}
    for r in csv.DictReader(open(t + "/out/sim.csv")):
        s = int(round(float(r["t_s"])))
        rows[s] = r
    return inst, rows

L = live_rows()
SI, SR = sim_rows()
# The live control loop starts a little before the first phase (server
# start-up); align on the first second with traffic on each side.
l0 = min((s for s in L if L[s][0]), default=1)
s0 = min((s for s in SI if SI[s]), default=1)

def phase_secs(i, first):
    return range(first + int(i * D), first + int((i + 1) * D))

def summary(inst_by_s, secs):
    tot = defaultdict(int)
    for s in secs:
        for v, k in inst_by_s.get(s, {}).items():
            tot[v] += k
    return tot

def settle(inst_by_s, secs):
    secs = list(secs)
    final = inst_by_s.get(secs[-1], {})
    for k, s in enumerate(secs):
        if all(inst_by_s.get(x, {}) == final for x in secs[k:]):
            return k
    return len(secs)

print("| phase | side | variants (instance-seconds) | settled after s | SLO violation | p99 ms | accuracy % |")
print("|---|---|---|---|---|---|---|")
agree = total = 0
for i, ph in enumerate(phases):
    lj = json.load(open("%s/live_%d.json" % (t, i)))
    lsecs, ssecs = phase_secs(i, l0), phase_secs(i, s0)
    linst = {s: L[s][0] for s in L}
    for a, b in zip(lsecs, ssecs):
        total += 1
        agree += linst.get(a, {}) == SI.get(b, {})
    lsum, ssum = summary(linst, lsecs), summary(SI, ssecs)
    lacc = [L[s][1] for s in lsecs if s in L and L[s][1] > 0]
    dem = sum(float(SR[s]["demand"]) for s in ssecs if s in SR)
    bad = sum(float(SR[s]["dropped"]) + float(SR[s]["late"]) for s in ssecs if s in SR)
    sp99 = max((float(SR[s]["p99_ms"]) for s in ssecs if s in SR), default=0)
    sacc = [float(SR[s]["accuracy"]) for s in ssecs if s in SR and float(SR[s]["accuracy"]) > 0]
    fmt = lambda d: ", ".join("%s %d" % kv for kv in sorted(d.items(), key=lambda kv: -kv[1])) or "-"
    print("| %s | live | %s | %d | %.2f%% | %.2f | %.2f |" % (
        ph, fmt(lsum), settle(linst, lsecs), 100 * (1 - lj["slo_attainment"]),
        lj["p99_us"] / 1e3, sum(lacc) / max(len(lacc), 1)))
    print("| %s | sim | %s | %d | %.2f%% | %.2f (max of per-second) | %.2f |" % (
        ph, fmt(ssum), settle(SI, ssecs), 100 * bad / max(dem, 1), sp99,
        sum(sacc) / max(len(sacc), 1)))
print()
print("Seconds whose variant sets (instances per variant) agree: %d of %d (%.0f%%)." %
      (agree, total, 100.0 * agree / max(total, 1)))
EOF
