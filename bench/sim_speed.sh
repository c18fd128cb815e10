#!/bin/sh
# Simulator speed: simulated requests per wall-clock second on one core.
#   bench/sim_speed.sh [path/to/vario]     (default: build-sim/vario)
# A synthetic INFaaS scenario: Poisson arrivals for 2 apps, 6 variants,
# dynamic batching, autoscaling every simulated second, service-time noise
# drawn from percentiles; 60 simulated seconds at three request rates,
# three seeds each, pinned to CPU 0.
set -e
VARIO=${1:-build-sim/vario}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
prof() { # name model app acc p50_b1 threads
  printf '{"model":"%s","app":"%s","variant":"%s","threads":%s,"max_batch":32,"load_ms":1000,"accuracy":%s,"cost_per_s":%s,"p50_ms":[%s,%s,%s,%s,%s,%s],"p99_ms":[%s,%s,%s,%s,%s,%s]}' \
    "$2" "$3" "$1" "$6" "$4" "0.00$6" \
    "$5" "$(echo "$5*1.3" | bc)" "$(echo "$5*1.8" | bc)" "$(echo "$5*2.8" | bc)" "$(echo "$5*4.5" | bc)" "$(echo "$5*8" | bc)" \
    "$(echo "$5*1.3" | bc)" "$(echo "$5*1.7" | bc)" "$(echo "$5*2.3" | bc)" "$(echo "$5*3.6" | bc)" "$(echo "$5*5.8" | bc)" "$(echo "$5*10" | bc)"
}
PROFS="$(prof a1/cpu a1 A 80 2 2),$(prof a2/cpu a2 A 90 5 4),$(prof a3/cpu a3 A 95 9 4),$(prof b1/cpu b1 B 85 1 1),$(prof b2/cpu b2 B 92 3 2),$(prof b3/cpu b3 B 97 6 4)"
for rate in 50000 200000 800000; do
  half=$((rate / 2))
  cat > "$TMP/c$rate.json" <<EOC
{"name": "speed-$rate", "duration_s": 60, "warmup_s": 5,
 "profiles": [$PROFS],
 "workers": [{"cores": 64, "mem_gb": 256, "price_per_s": 0.001, "start_s": 5, "initial": 4, "max": 400}],
 "policy": {"name": "infaas"},
 "workloads": [
  {"kind": "poisson", "rate": $half, "app": "A", "slo_ms": 100, "min_accuracy": 85},
  {"kind": "poisson", "rate": $half, "app": "B", "slo_ms": 50, "min_accuracy": 90}]}
EOC
  for seed in 1 2 3; do
    # captured, not piped: a failed run stops the script (sh has no pipefail)
    out=$(taskset -c 0 "$VARIO" sim --config "$TMP/c$rate.json" --seed $seed) ||
      { echo "sim_speed: vario sim failed (rate $rate, seed $seed)" >&2; exit 1; }
    printf '%s\n' "$out" | awk -v rate=$rate -F'[:,]' '/"demand"/{d=$2} /"slo_violation_rate"/{v=$2} /"wall_s"/{w=$2}
        /"sim_requests_per_s"/{printf "rate %7d qps  requests %9d  violations %.4f  wall %.3f s  %.2f M simulated req/s\n", rate, d, v, w, $2/1e6}'
  done
done
