#!/bin/sh
# INFaaS with the authors' artifact's CPU replica cap (autoscaler.cc,
# CPU_MAX_REPLICAS = 2 per worker; not in the paper): a CPU variant that
# would need more instances than the cap upgrades to a higher-throughput
# variant that fits now (a GPU one) instead of replicating. Re-runs INFaaS
# on /tmp copies of the Proteus configs and the fluctuating load with
# "cpu_max_replicas" set (0 = off, the configs), on seeds 1..5; nothing
# else changes. The cap counts a variant's instances over all workers: 2
# is the artifact's value on one worker, 4 on the two VMs up at t = 0.
#
#   experiments/proteus/infaas_cpu_cap.sh [DATA_DIR] [VARIO]
# prints: trace=<t> cap=<n> seed=<s> violations_pct=<x> cost=<x>
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${1:-$ROOT/../shared/data}
VARIO=${2:-$ROOT/build/vario}
if [ ! -d "$DATA/proteus" ]; then
  echo "infaas_cpu_cap.sh: no Proteus data under $DATA; skipping" >&2
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for tr in proteus/zipf proteus/medium infaas/fluctuating; do
  for cap in 0 2 4; do
    name=$(basename "$tr")
    /usr/bin/python3 - "$ROOT/experiments/$tr.json" "$cap" \
      "$TMP/${name}_$cap.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["policies"]["infaas"]["cpu_max_replicas"] = int(sys.argv[2])
json.dump(c, open(sys.argv[3], "w"))
PY
    for seed in 1 2 3 4 5; do
      "$VARIO" sim --config "$TMP/${name}_$cap.json" --data "$DATA" \
        --policy infaas --seed "$seed" --quiet --output "$TMP/out"
      /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(f'trace={sys.argv[2]} cap={sys.argv[3]} seed={sys.argv[4]} \
violations_pct={100*d[\"slo_violation_rate\"]:.2f} cost={d[\"cost\"]:.3f}')" \
        "$TMP/out.json" "$name" "$cap" "$seed"
    done
  done
done
