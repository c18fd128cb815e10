#!/bin/sh
# Autoscaler reaction time to a load step: 100 -> 1000 qps at t = 30 s
# (and back to 100 at t = 90 s) on a synthetic variant (1 core, batch up to
# 8, 400 qps per instance under a 100 ms SLO, load time 1 s) with room on
# already-running workers. Reports, per policy: seconds from the step until
# the instance count first reaches its level at t = 80 s; seconds until
# SLO violations stay below 1% for 5 s; violations in the 10 s after the
# step; and seconds after the step down until instances fall to 1.
#   bench/autoscale_step.sh [path/to/vario]
set -e
VARIO=${1:-build-sim/vario}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/step.json" <<'EOC'
{"name": "step", "duration_s": 150, "seed": 1,
 "profiles": [{"model": "m", "app": "a", "variant": "m/cpu/t1/b8", "threads": 1,
   "max_batch": 8, "load_ms": 1000, "accuracy": 90, "cost_per_s": 0.001,
   "p50_ms": [5, 8, 12, 20], "p99_ms": [7, 10, 15, 25]}],
 "workers": [{"cores": 16, "mem_gb": 64, "price_per_s": 0.01, "start_s": 30,
   "initial": 1, "max": 4}],
 "policies": {"infaas": {"name": "infaas"},
              "sm": {"name": "sm", "fixed": [{"variant": "m/cpu/t1/b8"}]}},
 "workloads": [{"kind": "piecewise", "step": true, "app": "a", "slo_ms": 100,
   "points": [[0, 100], [30, 1000], [90, 100]]}]}
EOC
for p in infaas sm; do
  "$VARIO" sim --config "$TMP/step.json" --policy $p --quiet --output "$TMP/$p"
  awk -F, -v p=$p 'NR > 1 { t = $1 + 0; inst[t] = $10; bad[t] = ($4 + $5) / ($2 > 0 ? $2 : 1);
        if (t > 30 && t <= 40) { v10 += $4 + $5; d10 += $2 } }
      END { target = inst[80]; up = -1; ok = -1; down = -1;
        for (t = 31; t <= 90; t++) if (up < 0 && inst[t] >= target) up = t - 30;
        for (t = 31; t <= 85; t++) { good = 1; for (k = 0; k < 5; k++) if (bad[t + k] >= 0.01) good = 0;
          if (ok < 0 && good) ok = t - 30 }
        for (t = 91; t <= 150; t++) if (down < 0 && inst[t] <= 1) down = t - 90;
        printf "%-7s instances %2d->%2d in %2d s; violations < 1%% after %2d s; %5.1f%% violations in first 10 s; back to 1 instance %2d s after the step down\n",
          p, inst[29], target, up, ok, 100 * v10 / d10, down }' "$TMP/$p.csv"
done
