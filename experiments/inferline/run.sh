#!/bin/sh
# InferLine experiments in the pipeline simulator (docs/EXPERIMENTS.md,
# section "(d) InferLine"): cost vs SLO for InferLine, planner only,
# CG-Peak and CG-Mean (AutoScale-tuned and static) at CV 1 and 4 on Loki's
# traffic-analysis pipeline and on Vario's example pipeline (profiles
# measured here, committed in experiments/inferline/fscenes_data), a 2x
# rate ramp on both, a 2.5x rate step, and InferLine's effective capacity
# on Loki's 20-worker cluster.
#   experiments/inferline/run.sh DATA_DIR [OUT]   (DATA_DIR like ../shared/data/loki)
# Writes OUT/inferline_slo.dat, OUT/inferline_ramp.txt,
# OUT/inferline_spike.txt (+ per-tick CSVs) and three plots,
# OUT/exp_inferline_{cost,miss,spike}.png (gnuplot).
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/experiments/inferline/lib.sh"
il_setup "inferline experiments" "$@"
# sweep DATA_DIR APP RATE ACCEL SLOS -> rows "cv slo policy cost miss p99"
sweep() {
  for cv in 1 4; do
    for slo in $5; do
      # captured, not piped: a failed run stops the sweep (sh has no pipefail)
      out=$("$BIN" "$1" "$2" --cv $cv --slo $slo --rate "$3" ${4:+--accel "$4"}) ||
        { echo "sweep: $BIN $1 $2 --cv $cv --slo $slo failed" >&2; return 1; }
      printf '%s\n' "$out" | while read -r line; do
        pol=$(echo "$line" | sed 's/policy=\([^ ]*\).*/\1/')
        printf '%s %s %s %s %s %s\n' $cv $slo "$pol" \
          "$(echo " $line" | field cost)" "$(echo " $line" | field p99_miss_pct)" \
          "$(echo " $line" | field p99_ms)"
      done
    done
  done
}
HDR='# cv slo_ms policy cost_per_h miss_pct p99_ms'
echo "$HDR" > "$OUT/inferline_slo.dat"
sweep "$DATA" $APP 30 "" "100 150 200 250 300 400" >> "$OUT/inferline_slo.dat"
"$BIN" "$DATA" $APP --ramp 2 > "$OUT/inferline_ramp.txt"
"$BIN" "$DATA" $APP --spike 2.5 --duration 180 --csv "$OUT/spike" \
  > "$OUT/inferline_spike.txt"
# InferLine's effective capacity on Loki's fixed 20-worker cluster
"$BIN" "$DATA" $APP --capacity 20 --duration 60 > "$OUT/inferline_capacity.txt"
# Vario's example pipeline, profiles measured here (bench/fscenes_data.sh)
echo "$HDR" > "$OUT/fscenes_slo.dat"
sweep "$FS" fashion_scenes 4000 "$FACCEL" "5 10 20 50 100" >> "$OUT/fscenes_slo.dat"
"$BIN" "$FS" fashion_scenes --rate 4000 --slo 20 --accel "$FACCEL" --ramp 2 \
  > "$OUT/fscenes_ramp.txt"
# per-second demand (root queries/s) and instances of each policy
for p in inferline inferline_plan cg_peak cg_mean; do
  awk -F, 'NR > 1 { s = int($1 + 1e-9); d[s] += $2; w[s] = $7; if (s > m) m = s }
    END { for (i = 0; i <= m; i++) print i, d[i], w[i] }' \
    "$OUT/spike.$p.csv" > "$OUT/spike.$p.dat"
done
rm -f "$OUT"/spike.*.csv
plot() { # ylabel column file logscale dat title
  gnuplot <<GP
set terminal pngcairo size 1000,420 noenhanced
set output "$3"
set multiplot layout 1,2
set xlabel "end-to-end SLO (ms)"
set ylabel "$1"
$4
set key top right
do for [cv in "1 4"] {
  set title sprintf("$6, Gamma CV = %s", cv)
  plot for [p in "inferline inferline_plan cg_peak cg_mean cg_peak_static cg_mean_static"] \
    sprintf("< awk '\$1==%s && \$3==\"%s\"' $5", cv, p) \
    using 2:$2 with linespoints title p
}
unset multiplot
GP
}
plot 'cost ($/h, time-averaged)' 4 "$OUT/exp_inferline_cost.png" 'set logscale y' "$OUT/inferline_slo.dat" "traffic analysis"
plot 'queries missing the SLO (%)' 5 "$OUT/exp_inferline_miss.png" 'set logscale y; set yrange [0.01:100]' "$OUT/inferline_slo.dat" "traffic analysis"
plot 'cost ($/h, time-averaged)' 4 "$OUT/exp_inferline_fscenes_cost.png" 'set logscale y' "$OUT/fscenes_slo.dat" "fashion scenes (4000 qps)"
plot 'queries missing the SLO (%)' 5 "$OUT/exp_inferline_fscenes_miss.png" 'set logscale y; set yrange [0.01:100]' "$OUT/fscenes_slo.dat" "fashion scenes (4000 qps)"
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
     "$OUT/spike.cg_peak.dat" using 1:3 with steps title "cg_peak instances (AutoScale)", \
     "$OUT/spike.cg_mean.dat" using 1:3 with steps title "cg_mean instances (AutoScale)", \
     "$OUT/spike.inferline.dat" using 1:2 axes x1y2 with lines lc rgb "gray" title "demand"
GP
echo "wrote $OUT: inferline_slo.dat fscenes_slo.dat *_ramp.txt inferline_spike.txt inferline_capacity.txt exp_inferline_*.png"
