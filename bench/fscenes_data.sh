#!/bin/sh
# Vario's example pipeline (models/pipelines/fashion_scenes) as a data set
# for the pipeline simulator, in the layout of ../shared/data/loki, from
# profiles measured on this machine by `vario register`:
#   bench/fscenes_data.sh OUT_DIR
# Writes OUT_DIR/apps/fashion_scenes.json, model_variants/fashion_scenes/
# <task>, profiling/simulator_runtimes.csv (one Accel per precision x
# threads variant: "fp32_t1", "fp32_t2", ...), profiling/branching.csv
# and OUT_DIR/accel (NAME=PRICE_PER_HOUR,... for bench/inferline_repro.sh's
# ACCEL, from the profiles' cost_per_s: threads x the per-core price).
# Tasks run the most accurate models (InferLine does not choose models):
# detect = fscenes_det_large, garment and footwear_bag = fmnist_cnn_bn
# (the best child on the detector's crops, eval.json; percent). The fan-out is the
# large detector's measured mean per canvas and its split between the two
# edges (eval.json). Latencies are p50/p90 per batch (1..16) of the
# variant with max batch 16 of each (precision, threads).
# Environment: VARIO (default build/vario), THREADS (default 2), RUNS
# (timed runs per batch, default 20). On a loaded machine the profiles are
# what the load let the profiler see: say so with the numbers.
set -eu
OUT=${1:?usage: $0 OUT_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VARIO=${VARIO:-$ROOT/build/vario}
P=$ROOT/models/pipelines/fashion_scenes
[ -x "$VARIO" ] || { echo "fscenes_data: no $VARIO (build first)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
reg() { # app name model.onnx accuracy
  "$VARIO" register --quiet --store "$TMP/db" --repo "$TMP/repo" --app "$1" \
    --name "$2" --model "$3" --declared-accuracy "$4" \
    --threads "${THREADS:-2}" --max-batch 16 --runs "${RUNS:-20}" >&2
}
ACC_DET=$(python3 -c "import json;print(json.load(open('$P/fscenes_det_large/config.json'))['accuracy'])")
ACC_CLS=$(python3 -c "import json;print(json.load(open('$P/eval.json'))['children_on_crops']['fmnist_cnn_bn'])")
reg fscenes_detect fscenes_det_large "$P/fscenes_det_large/model.onnx" "$ACC_DET"
reg fashion fmnist_cnn_bn "$ROOT/models/fmnist/fmnist_cnn_bn/model.onnx" "$ACC_CLS"
mkdir -p "$OUT/apps" "$OUT/model_variants/fashion_scenes" "$OUT/profiling"
python3 - "$TMP/repo" "$P" "$OUT" <<'PY'
import glob, json, os, sys
repo, p, out = sys.argv[1:4]
spec = json.load(open(f"{p}/pipeline.json"))
ev = json.load(open(f"{p}/eval.json"))
det = ev["detectors"]["fscenes_det_large"]
models = {"detect": "fscenes_det_large", "garment": "fmnist_cnn_bn",
          "footwear_bag": "fmnist_cnn_bn"}
app = {"appName": "fashion_scenes", "latencySLOInMSec": spec["latency_ms"],
       "root": {"task": "detect", "model_variants": [models["detect"]],
                "children": [{"task": t, "label": i,
                              "model_variants": [models[t]], "children": []}
                             for i, t in enumerate(["garment", "footwear_bag"])]}}
json.dump(app, open(f"{out}/apps/fashion_scenes.json", "w"), indent=1)
rows, accel, acc = [], {}, {}
for f in sorted(glob.glob(f"{repo}/*/profiles/*-b16.json")):
    pr = json.load(open(f))
    hw = f"{pr['precision']}_t{pr['threads']}"
    accel[hw] = pr["cost_per_s"] * 3600
    acc[pr["model"]] = pr["accuracy"]
    for b, p50, p90 in zip(pr["batch"], pr["p50_ms"], pr["p90_ms"]):
        if p50 is None or b > pr["max_batch"]:
            continue
        rows.append((pr["model"], hw, b, p50, p90 if p90 is not None else p50))
with open(f"{out}/profiling/simulator_runtimes.csv", "w") as w:
    w.write(",Model,Accel,batchsize,avg_runtime,50th_pct,90th_pct,95th_pct\n")
    for i, (m, hw, b, p50, p90) in enumerate(rows):
        w.write(f"{i},{m},{hw},{b},{p50:.6f},{p50:.6f},{p90:.6f},{p90:.6f}\n")
for t, m in models.items():
    open(f"{out}/model_variants/fashion_scenes/{t}", "w").write(f"{m},{acc[m]:.4f}\n")
mult = det["fanout_per_canvas"]
with open(f"{out}/profiling/branching.csv", "w") as w:
    w.write(",model,mult_factor,garment,footwear_bag\n")
    w.write(f"0,fscenes_det_large,{mult},{det['fanout_garment'] / mult:.6f},"
            f"{det['fanout_footwear_bag'] / mult:.6f}\n")
open(f"{out}/accel", "w").write(",".join(f"{k}={v:.6f}" for k, v in sorted(accel.items())) + "\n")
print(f"fscenes_data: {len(rows)} profile rows, accelerators {sorted(accel)}", file=sys.stderr)
PY
echo "$OUT"
