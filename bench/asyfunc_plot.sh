#!/usr/bin/env bash
# Box plots of the per-period CPU cores and memory GB allocated under
# AsyFunc, AsyFunc⁻ and BATCH (from bench/asyfunc_repro.sh's periods.csv),
# each model normalised to BATCH's mean, like the paper's Fig. 9/10.
#   bench/asyfunc_plot.sh [OUT_DIR]      (default out/asyfunc)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/asyfunc}
csv=$OUT/periods.csv
[ -s "$csv" ] || { echo "no $csv: run bench/asyfunc_repro.sh first" >&2; exit 1; }
models=$(cut -d, -f1 "$csv" | awk '!s[$0]++')
for col in 4 5; do
  what=$([ $col = 4 ] && echo cpu || echo mem)
  ylabel=$([ $col = 4 ] && echo "CPU cores per period / BATCH mean" || echo "memory GB per period / BATCH mean")
  i=0; xt=""; plots=""
  for m in $models; do
    base=$(awk -F, -v m="$m" -v c=$col '$1==m && $2=="batch" {s+=$c; n++} END {print (n ? s/n : 1)}' "$csv")
    j=0
    for p in asyfunc asyfunc- batch; do
      f=$OUT/box_${what}_${m}_$j.dat
      awk -F, -v m="$m" -v p="$p" -v c=$col -v b="$base" '$1==m && $2==p {print $c / b}' "$csv" > "$f"
      color=$(echo "#d62728 #2ca02c #1f77b4" | cut -d' ' -f$((j + 1)))
      title=$([ $i = 0 ] && echo "title \"$p\"" || echo notitle)
      plots="$plots${plots:+, }\"$f\" using ($((i * 4 + j))):1 with boxplot lc rgb \"$color\" $title"
      j=$((j + 1))
    done
    xt="$xt${xt:+, }\"$m\" $((i * 4 + 1))"
    i=$((i + 1))
  done
  gnuplot <<GP
set terminal pngcairo size 900,420 font ",10" noenhanced
set output "$OUT/asyfunc_$what.png"
set style fill solid 0.4 border -1
set style boxplot outliers pointtype 7
set style data boxplot
set boxwidth 0.8
set pointsize 0.3
set ylabel "$ylabel"
set xtics ($xt)
set key outside right top
set yrange [0:*]
set title "AsyFunc simulator: $what allocated per 60-s period, normalised to BATCH's mean"
plot $plots
GP
done
echo "$OUT/asyfunc_cpu.png $OUT/asyfunc_mem.png"
