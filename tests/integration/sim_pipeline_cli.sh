#!/bin/sh
# `vario sim` on a pipeline: a Loki-format app and profile CSVs (made up
# here), the one-line-per-policy contract, outputs, clear errors; then the
# published Loki artifact when ../shared is present.
# Usage: sim_pipeline_cli.sh path/to/vario SOURCE_DIR
set -u
VARIO=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
LINE='^policy=[a-z_]* violations_pct=[0-9.]* capacity_qps=[0-9.]* offpeak_servers=[0-9.]* accuracy_pct=[0-9.]*$'

cat > "$T/app.json" <<'EOC'
{"appName": "duo", "latencySLOInMSec": 150,
 "root": {"task": "det", "model_variants": ["d1", "d2"],
  "children": [{"task": "cls", "label": 3, "model_variants": ["c1", "c2"],
                "children": [{"task": "sink", "model_variants": ["sink"], "children": []}]}]}}
EOC
cat > "$T/rt.csv" <<'EOC'
,Model,Accel,batchsize,avg_runtime,50th_pct,90th_pct,95th_pct
0,d1,gpu,1,9,10,11,12
1,d1,gpu,2,9,16,17,18
2,d2,gpu,1,9,4,5,6
3,c1,gpu,1,9,3,4,4
4,c1,gpu,2,9,5,6,6
5,c2,gpu,1,9,1,2,2
EOC
printf ',model,mult_factor,cls\n0,d1,3,1.0\n1,d2,1.5,1.0\n' > "$T/br.csv"
mkdir "$T/mv"
printf 'd1,100\nd2,70\n' > "$T/mv/det"
printf 'c1,100\nc2,85\n' > "$T/mv/cls"

"$VARIO" sim --pipeline "$T/app.json" --runtimes "$T/rt.csv" \
  --branching "$T/br.csv" --variants "$T/mv" --accel gpu --workers 6 \
  --demand 0:20,30:20 --output "$T/r" > "$T/out" 2> "$T/err" || fail "run: $(cat "$T/err")"
[ "$(wc -l < "$T/out")" -eq 1 ] || fail "one line per policy: $(cat "$T/out")"
grep -Eq "$LINE" "$T/out" || fail "line format: $(cat "$T/out")"
[ -s "$T/r.hw.csv" ] && [ -s "$T/r.hw.json" ] || fail "outputs"
[ "$(wc -l < "$T/r.hw.csv")" -eq 31 ] || fail "csv rows"
grep -q '"mult_observed"' "$T/r.hw.json" || fail "summary"

# bad input: clear message, exit 1 or 2, nothing else
printf '{"appName":"x","latencySLOInMSec":100,"root":{"task":"a","model_variants":[]}}' > "$T/bad.json"
"$VARIO" sim --pipeline "$T/bad.json" --runtimes "$T/rt.csv" > /dev/null 2> "$T/err"
[ $? -eq 1 ] || fail "bad app exit"
grep -q "task 'a' has no model" "$T/err" || fail "bad app message: $(cat "$T/err")"
printf ',Model,Accel,batchsize,avg_runtime,50th_pct\n0,d1,gpu,x,1,2\n' > "$T/badrt.csv"
"$VARIO" sim --pipeline "$T/app.json" --runtimes "$T/badrt.csv" --accel gpu > /dev/null 2> "$T/err"
[ $? -eq 1 ] || fail "bad csv exit"
grep -q "badrt.csv:2" "$T/err" || fail "bad csv message: $(cat "$T/err")"
"$VARIO" sim --pipeline "$T/app.json" --runtimes "$T/rt.csv" --accel gpu --policy nope > /dev/null 2> "$T/err"
[ $? -eq 1 ] || fail "unknown policy exit"
grep -q "unknown pipeline policy 'nope'" "$T/err" || fail "policy message"
"$VARIO" sim --pipeline "$T/app.json" --runtimes "$T/rt.csv" --demand 5:1,2:1 > /dev/null 2>&1
[ $? -eq 2 ] || fail "bad demand exit"
"$VARIO" sim --loki "$T/none" --app x > /dev/null 2>&1
[ $? -eq 77 ] || fail "missing data exit"
# an SLO no path meets (d2 + c2 = 5 ms > 8 / 2): an error naming the
# bottleneck, not a run that drops every query
sed 's/"latencySLOInMSec": 150/"latencySLOInMSec": 8/' "$T/app.json" > "$T/tight.json"
"$VARIO" sim --pipeline "$T/tight.json" --runtimes "$T/rt.csv" --accel gpu --policy loki \
  --demand 0:20,10:20 > "$T/out" 2> "$T/err"
[ $? -eq 1 ] || fail "infeasible SLO exit: $(cat "$T/out")"
grep -q "SLO 8.0 ms is infeasible.*bottleneck stage 'det' (4.0 ms on 'd2')" "$T/err" \
  || fail "infeasible SLO message: $(cat "$T/err")"
# InferLine plans at the demand's first rate: none is a clear error, not
# a hint at vario serve's --inferline-rate
"$VARIO" sim --pipeline "$T/app.json" --runtimes "$T/rt.csv" --accel gpu --policy inferline \
  --demand 0:0,10:20 > /dev/null 2> "$T/err"
[ $? -eq 1 ] || fail "inferline at 0 q/s exit"
grep -q "rate at t = 0, and the first --demand point is 0 q/s" "$T/err" \
  || fail "inferline at 0 q/s message: $(cat "$T/err")"

# the published artifact, when present
D="$SRC/../shared/data/loki"
if [ -f "$D/apps/traffic_analysis.json" ]; then
  "$VARIO" sim --loki "$D" --app traffic_analysis --demand 0:20,20:20 > "$T/out" 2> "$T/err" \
    || fail "loki run: $(cat "$T/err")"
  grep -Eq "$LINE" "$T/out" || fail "loki line: $(cat "$T/out")"
  grep -q "efficientnet-b7: no runtimes" "$T/err" || fail "loki note"
else
  echo "skip: $D absent"
fi
echo ok
