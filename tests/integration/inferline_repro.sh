#!/bin/sh
# bench/inferline_repro.sh: the one-line-per-policy contract on a small
# Loki-layout data set made up here, the CV/RATE knobs, a clean skip
# without data, and a clear error line for an SLO no policy can meet.
# Usage: inferline_repro.sh path/to/bench_inferline_repro SOURCE_DIR
set -u
BIN=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$T/apps" "$T/model_variants/duo" "$T/profiling"
cat > "$T/apps/duo.json" <<'EOC'
{"appName": "duo", "latencySLOInMSec": 120,
 "root": {"task": "det", "model_variants": ["d1"],
  "children": [{"task": "cls", "label": 3, "model_variants": ["c1"],
                "children": [{"task": "sink", "model_variants": ["sink"], "children": []}]}]}}
EOC
cat > "$T/profiling/simulator_runtimes.csv" <<'EOC'
,Model,Accel,batchsize,avg_runtime,50th_pct,90th_pct,95th_pct
0,d1,gpu,1,9,10,11,12
1,d1,gpu,2,9,16,17,18
2,d1,gpu,4,9,28,30,31
3,c1,gpu,1,9,3,4,4
4,c1,gpu,2,9,5,6,6
5,c1,gpu,4,9,8,9,9
EOC
printf ',model,mult_factor,cls\n0,d1,2,1.0\n' > "$T/profiling/branching.csv"
printf 'd1,100\n' > "$T/model_variants/duo/det"
printf 'c1,100\n' > "$T/model_variants/duo/cls"
LINE='^policy=[a-z_]* cost=[0-9.]* p99_miss_pct=[0-9.]* cv=[0-9.]*$'
ACCEL=gpu=0.9
export BIN ACCEL
out=$(CV=4 RATE=40 sh "$SRC/bench/inferline_repro.sh" "$T" duo) || fail "exit $?"
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 6 ] || fail "expected 6 lines"
[ "$(echo "$out" | grep -c "$LINE")" -eq 6 ] || fail "line format"
for p in inferline inferline_plan cg_peak cg_mean cg_peak_static cg_mean_static; do
  echo "$out" | grep -q "^policy=$p .* cv=4$" || fail "no line for $p"
done
# InferLine cheaper than CG-Peak on the same trace
il=$(echo "$out" | sed -n 's/^policy=inferline cost=\([0-9.]*\).*/\1/p')
pk=$(echo "$out" | sed -n 's/^policy=cg_peak cost=\([0-9.]*\).*/\1/p')
awk -v a="$il" -v b="$pk" 'BEGIN { exit !(a < b) }' || fail "inferline $il >= cg_peak $pk"
# no data: skipped, exit 0, nothing on stdout
out=$(sh "$SRC/bench/inferline_repro.sh" "$T/none" duo 2>"$T/err") || fail "skip exit $?"
[ -z "$out" ] || fail "skip printed to stdout"
grep -q "skipped" "$T/err" || fail "no skip message"
# an SLO below the service time: one line per policy, saying why
out=$(SLO_MS=5 DETAIL=1 sh "$SRC/bench/inferline_repro.sh" "$T" duo) || fail "infeasible exit $?"
echo "$out" | grep -q "^policy=inferline cost=nan .*bottleneck stage 'det'" || fail "infeasible line: $out"
echo PASS
