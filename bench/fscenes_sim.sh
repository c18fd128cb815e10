#!/bin/sh
# The example pipeline (models/pipelines/fashion_scenes) in the pipeline
# simulator, from its own measured profiles (issue 14):
#   bench/fscenes_sim.sh [BUILD_DIR]
#  1. registers the Fashion-MNIST family and the three detectors with
#     `vario register` (fp32, 1 thread, max batch 16): the profiler measures
#     each model's latency at batch 1..16 on this machine;
#  2. writes what the simulator reads, from those measurements only:
#     OUT/runtimes.csv (Loki's runtimes columns: Model, Accel=cpu,
#     batchsize, 50th_pct, 90th_pct from each model's max-batch profile) and
#     OUT/pipeline.json (models/pipelines/fashion_scenes/pipeline.json with
#     every task's variants: detector accuracy = its config's per-cell
#     accuracy, child accuracy = eval.json's accuracy on item crops;
#     detector multiplicative factor and per-child shares = eval.json's
#     fan-out per canvas on the 1000 validation canvases);
#  3. runs `vario sim --pipeline` with Loki, hardware-only and INFaaS-like
#     planning under a rising demand; one line per policy:
#       policy=<name> violations_pct=<x> capacity_qps=<x> offpeak_servers=<x> accuracy_pct=<x>
#     and, on stderr, per policy the multiplicative factor the simulator
#     observed per detector variant and the p99 end to end.
# Environment: OUT (kept directory; default a temporary one), WORKERS (4:
# one variant instance per worker, as Loki's; a 1-thread variant per core
# of a 4-core box), DEMAND (canvases/s, T:QPS,...; default 100/s for 60 s,
# a 2-min ramp to 12000/s, 1 min there, back to 100/s),
# SLACK (1.5), SEED (1), RUNS (profiling runs per batch size, 20).
# Needs only the committed models (no ../shared data).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
V=$BUILD/vario
P=$ROOT/models/pipelines/fashion_scenes
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  W=$OUT
else
  W=$(mktemp -d)
  trap 'rm -rf "$W"' EXIT
fi
rm -rf "$W/store.db" "$W/repo"
. "$ROOT/scripts/lib.sh"
FLAGS="--threads 1 --max-batch 16 --precisions fp32 --runs ${RUNS:-20}"
# shellcheck disable=SC2086
vr_register_fmnist "$V" "$ROOT" "$W/store.db" "$W/repo" $FLAGS
for m in fscenes_det_tiny fscenes_det_small fscenes_det_large; do
  acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$P/$m/config.json'))['accuracy'])")
  # shellcheck disable=SC2086
  "$V" register --quiet --store "$W/store.db" --repo "$W/repo" --app fscenes_detect \
    --model "$P/$m/model.onnx" --name "$m" --declared-accuracy "$acc" $FLAGS
done

/usr/bin/python3 - "$W" "$P" <<'PYEOF'
import glob, json, os, sys
w, p = sys.argv[1:3]
ev = json.load(open(f"{p}/eval.json"))          # accuracies in percent
spec = json.load(open(f"{p}/pipeline.json"))
rows = []
for prof in sorted(glob.glob(f"{w}/repo/*/profiles/*-fp32-t1-b16.json")):
    j = json.load(open(prof))
    for b, p50, p90 in zip(j["batch"], j["p50_ms"], j.get("p90_ms") or []):
        if p50 is not None:
            rows.append(f"{j['model']},cpu,{b},{p50:.6f},{p90 if p90 is not None else p50:.6f}")
with open(f"{w}/runtimes.csv", "w") as f:
    f.write("Model,Accel,batchsize,50th_pct,90th_pct\n" + "\n".join(rows) + "\n")
dets = ev["detectors"]
for t in spec["tasks"]:
    if t["name"] == "detect":
        t["variants"] = [{"name": d,
                          "accuracy": json.load(open(f"{p}/{d}/config.json"))["accuracy"],
                          "mult": m["fanout_per_canvas"],
                          "shares": {"garment": m["fanout_garment"] / m["fanout_per_canvas"],
                                     "footwear_bag": m["fanout_footwear_bag"] / m["fanout_per_canvas"]}}
                         for d, m in dets.items()]
    else:
        t["variants"] = [{"name": c, "accuracy": a} for c, a in ev["children_on_crops"].items()]
json.dump(spec, open(f"{w}/pipeline.json", "w"), indent=1)
print(f"fscenes_sim: {len(rows)} measured (model, batch) rows; "
      + ", ".join(f"{d} mult {m['fanout_per_canvas']:.3f}" for d, m in dets.items()), file=sys.stderr)
PYEOF

"$V" sim --pipeline "$W/pipeline.json" --runtimes "$W/runtimes.csv" --accel cpu \
  --workers "${WORKERS:-4}" --demand "${DEMAND:-0:100,60:100,180:12000,240:12000,300:100}" \
  --warmup 10 --slack "${SLACK:-1.5}" --seed "${SEED:-1}" \
  --policy loki,hw,infaas --output "$W/sim"
for pol in loki hw infaas; do
  /usr/bin/python3 - "$W/sim.$pol.json" "$pol" <<'PYEOF' >&2
import json, sys
j = json.load(open(sys.argv[1]))
det = j["tasks"][0]
mult = ", ".join(f"{v} {m:.3f}" for v, m in det["mult_observed"].items())
print(f"  {sys.argv[2]}: p99 {j['p99_ms']:.2f} ms end to end; detector variants served and "
      f"their observed factor: {mult}")
PYEOF
done
