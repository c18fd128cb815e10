#!/bin/sh
# CLI conventions (issue 19): --version, `help CMD` and `CMD --help` exit 0
# for every command; unknown commands and bad --log-level exit 2; the
# accuracy of `vario eval` is a percent; help texts offer one flag name per
# concept; deprecated flag aliases still work.
V=$1
ROOT=$2
fail() { echo "FAIL: $*"; exit 1; }
"$V" --version | grep -q '^vario [0-9]' || fail "--version"
"$V" help > /dev/null || fail "help"
cmds=$("$V" --help | awk '/^commands:/ {on=1; next} on && NF == 0 {exit} on {print $1}')
[ -n "$cmds" ] || fail "no commands listed"
for c in $cmds; do
  [ "$c" = help ] && continue
  "$V" help "$c" > /dev/null 2>&1 || fail "vario help $c exits $?"
  "$V" "$c" --help > /dev/null 2>&1 || fail "vario $c --help exits $?"
  # one flag name per concept: an old spelling appears in a help text only
  # where it is called an alias
  old=$("$V" help "$c" 2>&1 | grep -E -- '(^|[^-a-z])--(inputs|val-inputs|val-labels|seconds|out|redis)([^-a-z]|$)' |
        grep -vE 'alias|old spelling')
  [ -z "$old" ] || fail "vario help $c offers an old flag spelling: $old"
done
# the pipeline simulator's help, as `vario sim --help` tells one to ask for it
"$V" sim --loki --help > /dev/null 2>&1 || fail "vario sim --loki --help exits $?"
"$V" sim --pipeline --help > /dev/null 2>&1 || fail "vario sim --pipeline --help exits $?"
old=$("$V" sim --loki --help 2>&1 | grep -E -- '(^|[^-a-z])--out([^-a-z]|$)' | grep -v alias)
[ -z "$old" ] || fail "vario sim --loki --help offers --out: $old"
"$V" nosuchcmd > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command must exit 2"
"$V" help nosuchcmd > /dev/null 2>&1; [ $? -eq 2 ] || fail "help of unknown command must exit 2"
"$V" --log-level loud version > /dev/null 2>&1; [ $? -eq 2 ] || fail "bad --log-level must exit 2"
"$V" version --log-level error | grep -q '^vario' || fail "--log-level after the command"
M=$ROOT/models/fmnist/fmnist_linear/model.onnx
D=$ROOT/models/fmnist-data
for flag in --input --inputs; do
  out=$("$V" eval "$M" $flag "$D/val_inputs.npy" --labels "$D/val_labels.npy" --json) ||
    fail "eval $flag"
  echo "$out" | python3 -c 'import json,sys; a=json.load(sys.stdin)["accuracy"]; sys.exit(0 if 50 < a <= 100 else 1)' ||
    fail "eval accuracy is not a percent: $out"
done
# numeric options are read whole: a typo is refused (exit 2) naming the
# option, not read as 0 or a default
bad_num() { # expected-option command...
  opt=$1
  shift
  msg=$("$V" "$@" 2>&1 > /dev/null)
  rc=$?
  [ $rc -eq 2 ] && echo "$msg" | grep -q -- "$opt" || fail "vario $* -> $rc: $msg"
}
bad_num --duration perf "$M" --duration 3s
bad_num --duration perf "$M" --duration 1e300
bad_num --threads perf "$M" --threads two
bad_num --batch eval "$M" --input "$D/val_inputs.npy" --labels "$D/val_labels.npy" --batch 8x
bad_num --threads run "$M" --input x.npy --output y.npy --threads 0
bad_num --duration sim --config none.json --duration abc
bad_num --workers sim --loki none --app a --workers many
bad_num --kappa asyfunc none.json --kappa -1
# the server-side commands share the same checks (NaN, overflow, trailing junk)
bad_num --default-slo-ms serve --repo none --default-slo-ms nan
bad_num --cores serve --repo none --cores 99999999999999999999
bad_num --port serve --repo none --port 80x
bad_num --declared-accuracy register --store none --app a --model m.onnx --declared-accuracy inf
bad_num --pipeline-slack controller --registry redis://x --repo none --pipeline-slack nan
bad_num --heartbeat-ms worker --heartbeat-ms 5
bad_num --cores worker --cores 0-4294967296
bad_num --tries frontend --registry redis://x --tries 9
bad_num --count cluster --registry redis://x watch --count 1.5
echo "cli conventions: ok ($(echo $cmds | wc -w) commands)"
