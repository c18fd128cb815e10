#!/bin/sh
# Plots a bench/loki_repro.sh run (OUT=DIR) as in Loki's Fig. 5: demand,
# system accuracy, workers in use and SLO violations per 10 s for Loki and
# the three baselines, and the routing ablation's violations (Fig. 7).
#   bench/loki_plot.sh DIR APP IMAGE.png
set -eu
DIR=$1 APP=$2 IMG=$3
command -v gnuplot >/dev/null || { echo "skip: gnuplot missing" >&2; exit 77; }
# 10-s windows: t, demand qps, accuracy, workers, path violations %
for p in loki hw proteus infaas loki_no_drop loki_last_task loki_per_task; do
  awk -F, 'NR > 1 { w = int($1 / 10); d[w] += $2; a[w] += $6 * ($3 + $4);
    s[w] += $3 + $4; k[w] += $7; n[w]++; u[w] += $9; b[w] += $10 }
    END { for (i in d) printf "%d %.2f %.3f %.2f %.3f\n", i * 10,
      d[i] / n[i], s[i] ? a[i] / s[i] : 0, k[i] / n[i],
      u[i] ? 100 * b[i] / u[i] : 0 }' "$DIR/$APP.$p.csv" | sort -n \
    > "$DIR/$p.win"
done
gnuplot <<EOG
set terminal pngcairo size 1100,1100 font ",10" noenhanced
set output "$IMG"
set multiplot layout 5,1 title "Loki reproduction in vario sim: $APP, 20 workers"
set key outside right
set xrange [0:*]
set ylabel "demand (qps)"
plot "$DIR/loki.win" u 1:2 w l lw 2 t "demand"
set ylabel "accuracy (%)"
plot for [p in "loki hw proteus infaas"] "$DIR/".p.".win" u 1:3 w l lw 2 t p
set ylabel "workers in use"
plot for [p in "loki hw proteus infaas"] "$DIR/".p.".win" u 1:4 w l lw 2 t p
set ylabel "SLO violations (%)"
set logscale y
set yrange [0.01:100]
plot for [p in "loki hw proteus infaas"] "$DIR/".p.".win" u 1:(\$5 > 0.01 ? \$5 : 0.01) w l lw 2 t p
set xlabel "time (s)"
plot for [p in "loki loki_no_drop loki_last_task loki_per_task"] "$DIR/".p.".win" u 1:(\$5 > 0.01 ? \$5 : 0.01) w l lw 2 t p
unset multiplot
EOG
