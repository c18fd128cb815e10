#!/bin/sh
# How much the INFaaS-vs-SM+ ordering on the Proteus traces rests on which
# variant SM+ scales per family. The configs give SM+ the variant with the
# highest saturation throughput per family; the INFaaS paper's §6.1 gave its
# baselines GPU variants for the popular models and CPU variants for the
# rest. This re-runs SM+ with its fixed list changed (one family at a time,
# then whole set-ups) on /tmp copies of the configs; nothing else changes,
# and INFaaS's own run does not depend on SM+'s list.
#
#   experiments/proteus/sm_variants.sh [DATA_DIR] [VARIO]
# prints: trace=<t> setup=<name> policy=<p> violations_pct=<x> cost=<x>
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${1:-$ROOT/../shared/data}
VARIO=${2:-$ROOT/build/vario}
if [ ! -d "$DATA/proteus" ]; then
  echo "sm_variants.sh: no Proteus data under $DATA; skipping" >&2
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 - "$ROOT" "$TMP" <<'PY'
import json, sys
root, tmp = sys.argv[1], sys.argv[2]
cpu = {"densenet121/gpu_pascal": "densenet121/cpu", "resnet34_v1/gpu_pascal": "resnet34_v1/cpu",
       "gpt2/gpu_pascal": "gpt2/cpu", "t5-base/gpu_pascal": "t5-base/cpu"}
gpu = {"mobilenet0.75/cpu": "mobilenet0.75/gpu_pascal",
       "efficientnet-b0/cpu": "efficientnet-b0/gpu_pascal"}
one = lambda k, d: {k: d[k]}
setups = {
    "configs": {},
    "densenet_cpu": one("densenet121/gpu_pascal", cpu),
    "resnet_cpu": one("resnet34_v1/gpu_pascal", cpu),
    "gpt2_cpu": one("gpt2/gpu_pascal", cpu),
    "t5_cpu": one("t5-base/gpu_pascal", cpu),
    "mobilenet_gpu": one("mobilenet0.75/cpu", gpu),
    "efficientnet_gpu": one("efficientnet-b0/cpu", gpu),
    # popular = the most requested families that together carry >= 80% of
    # the queries (mobilenet, efficientnet, resnest, bert, yolo on both
    # traces): GPU; the rest: CPU (the paper's split, literally).
    "paper_split": {**cpu, **gpu},
    # the same, but CPU only where the CPU variant's batch-1 tail is within
    # SLO / 1.5 (the paper's cold models had SLO = 1.5x their CPU latency):
    # gpt2 and t5 (275-283 ms against 300) stay on GPU.
    "paper_split_slo": {**one("densenet121/gpu_pascal", cpu),
                        **one("resnet34_v1/gpu_pascal", cpu), **gpu},
}
with open(f"{tmp}/setups", "w") as out:
    for tr in ("zipf", "medium"):
        c0 = json.load(open(f"{root}/experiments/proteus/{tr}.json"))
        for name, m in setups.items():
            c = json.loads(json.dumps(c0))
            for f in c["policies"]["sm"]["fixed"]:
                f["variant"] = m.get(f["variant"], f["variant"])
            json.dump(c, open(f"{tmp}/{tr}_{name}.json", "w"))
            out.write(f"{tr} {name}\n")
PY
run() { # trace setup policy
  "$VARIO" sim --config "$TMP/$1_$2.json" --data "$DATA" --policy "$3" --quiet \
    --output "$TMP/out"
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(f'trace={sys.argv[2]} setup={sys.argv[3]} policy={sys.argv[4]} \
violations_pct={100*d[\"slo_violation_rate\"]:.2f} cost={d[\"cost\"]:.3f}')" \
    "$TMP/out.json" "$1" "$2" "$3"
}
while read -r tr setup; do
  [ "$setup" = configs ] && run "$tr" configs infaas
  run "$tr" "$setup" sm
done < "$TMP/setups"
