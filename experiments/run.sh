#!/bin/sh
# Runs every experiment config under every policy label it defines and
# writes, per experiment, the JSON summaries and per-second CSVs to
# OUT/<experiment>/<policy>.{json,csv}, a comparison plot OUT/<exp>.png, a
# markdown table OUT/table.md and the same rows unrounded in OUT/summary.csv
# (what experiments/orderings.py checks).
#
#   experiments/run.sh [DATA_DIR] [OUT_DIR] [VARIO]
#     DATA_DIR  shared data (default ../shared/data); exits 77 if missing
#     OUT_DIR   default experiments/results
#     VARIO     default build-sim/vario
#   VR_EXP_PLOTS=0 skips the gnuplot plots (experiments/check.sh, CI).
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${1:-$ROOT/../shared/data}
OUT=${2:-$ROOT/experiments/results}
VARIO=${3:-$ROOT/build-sim/vario}
if [ ! -d "$DATA/proteus" ]; then
  echo "experiments/run.sh: no Proteus data under $DATA (pass DATA_DIR); skipping" >&2
  exit 77
fi
mkdir -p "$OUT"
TABLE="$OUT/table.md"
printf '| experiment | policy | requests | SLO violations | p99 ms | accuracy | cost | mean instances | mean workers |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n' > "$TABLE"
SUMMARY="$OUT/summary.csv"
echo 'experiment,policy,requests,slo_violation_pct,latency_p99_ms,accuracy,cost,mean_instances,mean_workers' > "$SUMMARY"
for cfg in "$ROOT"/experiments/infaas/*.json "$ROOT"/experiments/proteus/*.json \
           "$ROOT"/experiments/synthetic/*.json; do
  exp=$(basename "$(dirname "$cfg")")_$(basename "$cfg" .json)
  mkdir -p "$OUT/$exp"
  labels=$(/usr/bin/python3 -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))['policies']))" "$cfg")
  plots=""
  for p in $labels; do
    "$VARIO" sim --config "$cfg" --data "$DATA" --policy "$p" --quiet --output "$OUT/$exp/$p"
    rm -f "$OUT/$exp/$p.instances.csv"
    /usr/bin/python3 - "$OUT/$exp/$p.json" "$exp" "$p" "$SUMMARY" >> "$TABLE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['demand']} | {100*d['slo_violation_rate']:.2f}% | "
      f"{d['latency_p99_ms']:.0f} | {d['accuracy']:.2f} | {d['cost']:.3f} | {d['mean_instances']:.1f} | {d['mean_workers']:.1f} |")
with open(sys.argv[4], "a") as f:
    f.write(",".join([sys.argv[2], sys.argv[3], str(d['demand'])] + [repr(float(x)) for x in (
        100 * d['slo_violation_rate'], d['latency_p99_ms'], d['accuracy'], d['cost'],
        d['mean_instances'], d['mean_workers'])]) + "\n")
PY
    plots="$plots '$OUT/$exp/$p.csv' every ::1 using 1:(\$4+\$5) with lines title '$p',"
  done
  [ "${VR_EXP_PLOTS:-1}" = 0 ] && continue
  cost_plots=$(echo "$plots" | sed 's/(\$4+\$5)/(column(8))/g')
  gnuplot <<GP
set terminal pngcairo size 800,560 font ',9' noenhanced
set output '$OUT/$exp.png'
set datafile separator ','
set grid
set key outside right top
set multiplot layout 2,1 title '$exp'
set ylabel 'dropped+late /s'
plot ${plots%,}
set ylabel 'cost /s'
set xlabel 'time (s)'
plot ${cost_plots%,}
unset multiplot
GP
done
cat "$TABLE"
