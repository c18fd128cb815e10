#!/bin/sh
# `vario sim` end to end: outputs, exit codes, error messages with
# file:line. Usage: sim_cli.sh path/to/vario
set -u
VARIO=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$T/ok.json" <<'EOC'
{"name": "cli", "duration_s": 10, "seed": 3,
 "profiles": ["prof.json"],
 "workers": [{"cores": 8, "mem_gb": 8, "price_per_s": 0.01, "initial": 1, "max": 2}],
 "policies": {"infaas": {"name": "infaas"},
              "sm": {"name": "sm", "fixed": [{"variant": "m/cpu"}]}},
 "workloads": [{"kind": "poisson", "rate": 200, "app": "a", "slo_ms": 100},
               {"kind": "trace", "file": "t.txt", "model": "m", "trace_slo": false, "slo_ms": 80}]}
EOC
cat > "$T/prof.json" <<'EOC'
{"profiles": [{"model": "m", "app": "a", "variant": "m/cpu", "threads": 2, "max_batch": 8,
  "load_ms": 200, "accuracy": 90, "cost_per_s": 0.001,
  "p50_ms": [4, 6, 9, 15], "p99_ms": [5, 8, 12, 20]}]}
EOC
printf '# trace\n0,1,300\n100,1,300,85\n2500,1,300\n' > "$T/t.txt"

"$VARIO" sim --config "$T/ok.json" --policy infaas --out "$T/r" --quiet || fail "run"
for f in r.csv r.instances.csv r.json; do [ -s "$T/$f" ] || fail "missing $f"; done
[ "$(wc -l < "$T/r.csv")" -eq 11 ] || fail "csv rows"
grep -q '"demand": ' "$T/r.json" || fail "summary"
"$VARIO" sim --config "$T/ok.json" --policy sm --quiet || fail "sm run"
# a duration within the warm-up would count nothing: refused, not zeros
sed 's/"duration_s": 10,/"duration_s": 10, "warmup_s": 5,/' "$T/ok.json" > "$T/warm.json"
"$VARIO" sim --config "$T/warm.json" --policy infaas --duration 3 --quiet 2> "$T/err"
[ $? -eq 2 ] && grep -q warmup_s "$T/err" || fail "duration within the warm-up: $(cat "$T/err")"

"$VARIO" sim --config "$T/ok.json" --quiet 2> "$T/err"; [ $? -eq 1 ] || fail "no label"
grep -q 'pick one with --policy: infaas sm' "$T/err" || fail "label message"
"$VARIO" sim > /dev/null 2>&1; [ $? -eq 2 ] || fail "usage exit"
"$VARIO" sim --config "$T/ok.json" --out "$T/ok" 2> /dev/null; [ $? -eq 2 ] || fail "overwrite guard"

printf '0,1,300\n5,1\n' > "$T/t.txt"
"$VARIO" sim --config "$T/ok.json" --policy infaas --quiet 2> "$T/err"; [ $? -eq 1 ] || fail "bad trace exit"
grep -q "t.txt:2: expected arrival_ms,qos,deadline_ms" "$T/err" || fail "trace file:line: $(cat "$T/err")"

printf '{"duration_s": 10,\n "bogus": 1}\n' > "$T/bad.json"
"$VARIO" sim --config "$T/bad.json" 2> "$T/err"; [ $? -eq 1 ] || fail "bad config exit"
grep -q 'unknown key "bogus"' "$T/err" || fail "bad key message"
printf '{"duration_s": 10,\n "x": }\n' > "$T/bad.json"
"$VARIO" sim --config "$T/bad.json" 2> "$T/err"; [ $? -eq 1 ] || fail "syntax exit"
grep -q 'bad.json:2:' "$T/err" || fail "syntax file:line: $(cat "$T/err")"

printf '{"proteus": {"csv": "data:proteus/x.csv"}, "workers": [{}], "workloads": []}\n' > "$T/data.json"
"$VARIO" sim --config "$T/data.json" 2> /dev/null; [ $? -eq 77 ] || fail "data skip exit"
echo "sim_cli: ok"
