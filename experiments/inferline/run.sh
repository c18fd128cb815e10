#!/bin/sh
# InferLine experiments in the pipeline simulator (docs/EXPERIMENTS.md,
# section "(d) InferLine"): cost vs SLO for InferLine, planner only,
# CG-Peak and CG-Mean at CV 1 and 4, and a 2x rate ramp.
#   experiments/inferline/run.sh DATA_DIR [OUT]   (DATA_DIR like ../shared/data/loki)
# Writes OUT/inferline_slo.dat, OUT/inferline_ramp.txt,
# OUT/inferline_spike.txt (+ per-tick CSVs) and three plots,
# OUT/exp_inferline_{cost,miss,spike}.png (gnuplot).
set -e
DATA=${1:?usage: $0 DATA_DIR [OUT]}
OUT=${2:-experiments/results/inferline}
BIN=${BIN:-build/bench/bench_inferline_repro}
APP=traffic_analysis
if [ ! -f "$DATA/apps/$APP.json" ]; then
  echo "inferline experiments: skipped: no $DATA/apps/$APP.json" >&2
  exit 0
fi
[ -x "$BIN" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build build -j "$(nproc)" --target bench_inferline_repro >/dev/null; }
mkdir -p "$OUT"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
printf '# cv slo_ms policy cost_per_h miss_pct p99_ms\n' > "$OUT/inferline_slo.dat"
for cv in 1 4; do
  for slo in 100 150 200 250 300 400; do
    "$BIN" "$DATA" $APP --cv $cv --slo $slo | while read -r line; do
      pol=$(echo "$line" | sed 's/policy=\([^ ]*\).*/\1/')
      printf '%s %s %s %s %s %s\n' $cv $slo "$pol" \
        "$(echo " $line" | field cost)" "$(echo " $line" | field p99_miss_pct)" \
        "$(echo " $line" | field p99_ms)"
    done >> "$OUT/inferline_slo.dat"
  done
done
"$BIN" "$DATA" $APP --ramp 2 > "$OUT/inferline_ramp.txt"
"$BIN" "$DATA" $APP --spike 2.5 --duration 180 --csv "$OUT/spike" \
  > "$OUT/inferline_spike.txt"
# per-second demand (root queries/s) and instances of each policy
for p in inferline inferline_plan cg_peak; do
  awk -F, 'NR > 1 { s = int($1 + 1e-9); d[s] += $2; w[s] = $7; if (s > m) m = s }
    END { for (i = 0; i <= m; i++) print i, d[i], w[i] }' \
    "$OUT/spike.$p.csv" > "$OUT/spike.$p.dat"
done
rm -f "$OUT"/spike.*.csv
plot() { # ylabel column file logscale
  gnuplot <<GP
set terminal pngcairo size 1000,420 noenhanced
set output "$3"
set multiplot layout 1,2
set xlabel "end-to-end SLO (ms)"
set ylabel "$1"
$4
set key top right
do for [cv in "1 4"] {
  set title sprintf("traffic analysis, Gamma CV = %s", cv)
  plot for [p in "inferline inferline_plan cg_peak cg_mean"] \
    sprintf("< awk '\$1==%s && \$3==\"%s\"' $OUT/inferline_slo.dat", cv, p) \
    using 2:$2 with linespoints title p
}
unset multiplot
GP
}
plot 'cost ($/h, time-averaged)' 4 "$OUT/exp_inferline_cost.png" 'set logscale y'
plot 'queries missing the SLO (%)' 5 "$OUT/exp_inferline_miss.png" 'set logscale y; set yrange [0.01:100]'
gnuplot <<GP
set terminal pngcairo size 1000,420 noenhanced
set output "$OUT/exp_inferline_spike.png"
set title "traffic analysis: 2.5x rate step for 20 s at t = 60 s (CV 1, SLO 250 ms)"
set xlabel "time (s)"
set ylabel "instances"
set y2label "root queries/s"
set y2tics
set ytics nomirror
plot "$OUT/spike.inferline.dat" using 1:3 with steps lw 2 title "inferline instances", \
     "$OUT/spike.inferline_plan.dat" using 1:3 with steps title "inferline_plan instances", \
     "$OUT/spike.cg_peak.dat" using 1:3 with steps title "cg_peak instances", \
     "$OUT/spike.inferline.dat" using 1:2 axes x1y2 with lines lc rgb "gray" title "demand"
GP
echo "wrote $OUT/inferline_slo.dat $OUT/inferline_ramp.txt $OUT/exp_inferline_{cost,miss}.png"
