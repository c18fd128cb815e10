#!/bin/sh
# The planner's (and the tuned InferLine's) misses over ten fresh
# evaluation traces (seeds 1001-1010, the same plan): the "Planner misses
# on fresh traces" table of docs/EXPERIMENTS.md, section (d). Also the
# CG-Peak rows with the paper's literal coarse batch rule (--cg-factor 1)
# for the table under "The coarse batch rule".
#   experiments/inferline/spread.sh DATA_DIR [OUT]   (DATA_DIR like ../shared/data/loki)
# Writes OUT/spread.txt (one line per point: label, then min / median /
# max of miss % and how many of the traces stay within 1 %) and
# OUT/cg_factor1.dat (cv slo policy cost miss, both pipelines).
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/experiments/inferline/lib.sh"
il_setup "inferline spread" "$@"
miss() { field p99_miss_pct; }
cost() { field cost; }
# point LABEL SEEDS POLICY ARGS... -> "LABEL policy min median max within/of cost"
point() {
  label=$1 seeds=$2 pol=$3
  shift 3
  vals=""
  c=""
  for s in $(seq 1001 $((1000 + seeds))); do
    line=$("$BIN" "$@" --policy "$pol" --eval-seed "$s")
    vals="$vals $(echo " $line" | miss)"
    c=$(echo " $line" | cost)
  done
  echo "$vals" | tr ' ' '\n' | grep . | sort -g | awk -v l="$label" -v p="$pol" -v c="$c" '
    { v[NR] = $1; if ($1 <= 1) w++ }
    END { printf "%s policy=%s min=%.2f median=%.2f max=%.2f within_1pct=%d/%d cost=%s\n",
          l, p, v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2),
          v[NR], w, NR, c }'
}
{
  for pol in inferline_plan inferline; do
    point "traffic cv=1 slo=200 sample=60" 10 $pol "$DATA" $APP --cv 1 --slo 200
    point "traffic cv=4 slo=150 sample=60" 10 $pol "$DATA" $APP --cv 4 --slo 150
    point "traffic cv=4 slo=250 sample=60" 10 $pol "$DATA" $APP --cv 4 --slo 250
    point "traffic cv=4 slo=400 sample=60" 10 $pol "$DATA" $APP --cv 4 --slo 400
  done
  point "traffic cv=4 slo=150 sample=240" 10 inferline_plan "$DATA" $APP --cv 4 --slo 150 --sample 240
  point "traffic cv=4 slo=250 sample=240" 10 inferline_plan "$DATA" $APP --cv 4 --slo 250 --sample 240
  for slo in 5 20; do
    point "example cv=4 slo=$slo sample=60" 6 inferline_plan "$FS" fashion_scenes \
      --rate 4000 --cv 4 --slo $slo --accel "$FACCEL"
  done
} > "$OUT/spread.txt"
echo '# cv slo_ms policy cost_per_h miss_pct (--cg-factor 1)' > "$OUT/cg_factor1.dat"
for cv in 1 4; do
  for slo in 100 150 200 250 300 400; do
    out=$("$BIN" "$DATA" $APP --cv $cv --slo $slo --cg-factor 1 --policy cg_peak_static,cg_peak)
    printf '%s\n' "$out" | while read -r l; do echo "traffic $cv $slo $(echo "$l" | sed 's/policy=\([^ ]*\).*/\1/') $(echo " $l" | cost) $(echo " $l" | miss)"; done
  done
  for slo in 5 10 20 50 100; do
    out=$("$BIN" "$FS" fashion_scenes --rate 4000 --cv $cv --slo $slo --accel "$FACCEL" --cg-factor 1 \
        --policy cg_peak_static,cg_peak)
    printf '%s\n' "$out" | while read -r l; do echo "example $cv $slo $(echo "$l" | sed 's/policy=\([^ ]*\).*/\1/') $(echo " $l" | cost) $(echo " $l" | miss)"; done
  done
done >> "$OUT/cg_factor1.dat"
echo "wrote $OUT/spread.txt $OUT/cg_factor1.dat"
