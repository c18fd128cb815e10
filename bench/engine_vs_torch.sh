#!/usr/bin/env bash
# Vario's engine side by side with PyTorch CPU (Debian python3-torch).
#
#   bench/engine_vs_torch.sh BUILD            # BUILD holds the vario binary
#   bench/engine_vs_torch.sh none             # PyTorch column only
#
# Part 1, ImageNet models (random weights, exported on demand by
# tools/zoo/export_torchvision.py into models/zoo/): for each model x batch
# x threads, runs `BUILD/vario perf MODEL --batch B --threads T --duration S
# --json` and bench/torch_bench.py with the same settings, one after the
# other (alternating per row), and prints a markdown table with latency,
# throughput, the Vario/PyTorch throughput ratio and each engine's share of
# the machine's peak fp32 FLOP/s.
#
# Part 2, Fashion-MNIST family (models/fmnist/): per model and precision
# fp32/bf16/int8, `vario perf` throughput and validation accuracy (with
# `vario eval` if it exists, else `vario run` on models/fmnist-data/
# val_inputs.npy scored against val_labels.npy), speed-up and accuracy change
# vs fp32.
#
# Environment (defaults in brackets):
#   BENCH_SECONDS [3]   timed seconds per measurement (plus warm-up)
#   BENCH_MODELS  [resnet18 resnet50 mobilenet_v2 efficientnet_b0 vit_b_16]
#   BENCH_BATCHES [1 8]  BENCH_THREADS [1 2]
#   BENCH_TIMEOUT [240]  hard limit in seconds for any single command
#   FMNIST_BATCH [16] FMNIST_THREADS [1]   settings of part 2
#   BENCH_PARTS  [imagenet fmnist]
# Raw JSON lines are kept in out/bench/engine_vs_torch-<time>.jsonl.
#
# Peak fp32 FLOP/s = cores x clock x 32 FLOP/cycle (two 256-bit FMA pipes;
# AVX-512 on Zen 4 is executed as 2x256 bit). The clock is lscpu's
# "CPU max MHz" when present, else /proc/cpuinfo's "cpu MHz" (a VM usually
# shows only the nominal clock; the real boost clock may be higher).
set -uo pipefail

BUILD=${1:?usage: bench/engine_vs_torch.sh BUILD_DIR|none}
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
S=${BENCH_SECONDS:-3}
MODELS=${BENCH_MODELS:-"resnet18 resnet50 mobilenet_v2 efficientnet_b0 vit_b_16"}
BATCHES=${BENCH_BATCHES:-"1 8"}
THREADS=${BENCH_THREADS:-"1 2"}
TMO=${BENCH_TIMEOUT:-240}
FB=${FMNIST_BATCH:-16}
FT=${FMNIST_THREADS:-1}
PARTS=${BENCH_PARTS:-"imagenet fmnist"}
VARIO="$BUILD/vario"

mkdir -p out/bench
RAW="out/bench/engine_vs_torch-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
: >"$RAW"

cores=$(nproc)
mhz=$(lscpu | awk -F: '/CPU max MHz/ {gsub(/ /,"",$2); print $2; exit}')
clock_src="lscpu CPU max MHz"
if [ -z "$mhz" ]; then
  mhz=$(awk -F: '/cpu MHz/ {gsub(/ /,"",$2); print $2; exit}' /proc/cpuinfo)
  clock_src="/proc/cpuinfo cpu MHz"
fi
peak=$(awk -v c="$cores" -v m="$mhz" 'BEGIN {printf "%.1f", c * m / 1000 * 32}')

vario_ok=1
vario_why=""
if [ "$BUILD" = none ]; then
  vario_ok=0; vario_why="not requested (BUILD=none)"
elif [ ! -x "$VARIO" ]; then
  vario_ok=0; vario_why="no $VARIO"
elif ! "$VARIO" perf --help >/dev/null 2>&1; then
  vario_ok=0; vario_why="'vario perf' not available in $VARIO"
fi

# emit KIND KEY... : appends {"kind":..., <json from stdin or error>} to RAW
record() { # record TAG JSON_OR_EMPTY ERROR
  $PY - "$1" "$2" "$3" >>"$RAW" <<'EOF'
import json, sys
tag, out, err = sys.argv[1], sys.argv[2], sys.argv[3]
rec = {"tag": tag}
line = next((l for l in reversed(out.splitlines()) if l.strip().startswith("{")), None)
if line is not None:
    try:
        rec.update(json.loads(line))
    except ValueError:
        line = None
if line is None:
    rec["error"] = (err or out or "no output").strip().splitlines()[-1][:160] if (err or out).strip() else "no output"
print(json.dumps(rec))
EOF
}

run_vario_perf() { # TAG MODEL B T PREC [extra...]
  local tag=$1 model=$2 b=$3 t=$4 prec=$5; shift 5
  if [ $vario_ok -eq 0 ]; then record "$tag" "" "$vario_why"; return; fi
  local out rc
  out=$(timeout "$TMO" "$VARIO" perf "$model" --batch "$b" --threads "$t" \
        --precision "$prec" --duration "$S" --json "$@" 2>&1); rc=$?
  if [ $rc -eq 124 ]; then out="timeout after ${TMO}s"; fi
  if [ $rc -ne 0 ]; then record "$tag" "" "vario perf rc=$rc: $out"; else record "$tag" "$out" ""; fi
}

run_torch() { # TAG MODEL B T
  local out rc
  out=$(timeout "$TMO" $PY bench/torch_bench.py --model "$2" --batch "$3" \
        --threads "$4" --duration "$S" --json 2>&1); rc=$?
  if [ $rc -eq 124 ]; then out="timeout after ${TMO}s"; fi
  if [ $rc -ne 0 ]; then record "$1" "" "torch_bench rc=$rc: $out"; else record "$1" "$out" ""; fi
}

echo "# Vario engine vs PyTorch CPU ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "Machine: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/,"",$2); print $2; exit}'), $cores cores;"\
     "peak fp32 = $cores cores x $mhz MHz ($clock_src) x 32 FLOP/cycle = $peak GFLOP/s."
echo "PyTorch $($PY -c 'import torch; print(torch.__version__)') (Debian python3-torch), ${S} s per measurement."
[ $vario_ok -eq 0 ] && echo "Vario column: NOT MEASURED — $vario_why."
echo "Raw results: $RAW"
echo "Load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs on the machine disturb the numbers)."
echo

if [[ " $PARTS " == *" imagenet "* ]]; then
  for m in $MODELS; do
    if [ ! -f "models/zoo/$m/model.onnx" ]; then
      echo "exporting $m ..." >&2
      timeout "$TMO" $PY tools/zoo/export_torchvision.py "$m" >/dev/null 2>&1 ||
        echo "export of $m failed" >&2
    fi
    for b in $BATCHES; do
      for t in $THREADS; do
        run_vario_perf "vario $m $b $t" "models/zoo/$m/model.onnx" "$b" "$t" fp32
        run_torch "torch $m $b $t" "$m" "$b" "$t"
      done
    done
  done
fi

if [[ " $PARTS " == *" fmnist "* ]]; then
  have_eval=0
  [ $vario_ok -eq 1 ] && "$VARIO" eval --help >/dev/null 2>&1 && have_eval=1
  for d in models/fmnist/*/; do
    m=$(basename "$d")
    run_torch "torch-fm $m $FB $FT" "$m" "$FB" "$FT"
    for p in fp32 bf16 int8; do
      extra=()
      [ "$p" = int8 ] && extra=(--calibration models/fmnist-data/calib_inputs.npy)
      run_vario_perf "vario-fm $m $FB $FT $p" "$d/model.onnx" "$FB" "$FT" "$p" "${extra[@]}"
      # accuracy on the 1000-image validation set
      if [ $vario_ok -eq 0 ]; then
        record "acc $m $p" "" "$vario_why"; continue
      fi
      if [ $have_eval -eq 1 ]; then
        out=$(timeout "$TMO" "$VARIO" eval "$d/model.onnx" \
              --input models/fmnist-data/val_inputs.npy \
              --labels models/fmnist-data/val_labels.npy \
              --precision "$p" "${extra[@]}" --json 2>&1) &&
          record "acc $m $p" "$out" "" || record "acc $m $p" "" "vario eval: $out"
      else
        tmp=$(mktemp --suffix=.npy)
        out=$(timeout "$TMO" "$VARIO" run "$d/model.onnx" \
              --input input=models/fmnist-data/val_inputs.npy --output "$tmp" \
              --precision "$p" "${extra[@]}" 2>&1)
        if [ $? -eq 0 ]; then
          acc=$($PY -c 'import numpy as np,sys,json; y=np.load(sys.argv[1]); l=np.load("models/fmnist-data/val_labels.npy"); print(json.dumps({"accuracy": 100 * float((y.argmax(1)==l).mean())}))' "$tmp" 2>&1)
          record "acc $m $p" "$acc" "scoring failed: $acc"
        else
          record "acc $m $p" "" "vario run: $out"
        fi
        rm -f "$tmp"
      fi
    done
  done
fi

echo "Load average at end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
$PY - "$RAW" "$peak" "$FB" "$FT" <<'EOF'
import json, sys
raw, peak, fb, ft = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
R = {}
for line in open(raw):
    r = json.loads(line)
    R[r["tag"]] = r

def cell(r):
    if r is None:
        return "not run", None
    if "error" in r:
        return "n/a: " + r["error"].replace("|", "/"), None
    return f"{r['p50_ms']:.2f} ms / {r['throughput']:.1f}/s", r

models, rows = [], []
for tag in R:
    k = tag.split()
    if k[0] == "torch" and len(k) == 4:
        rows.append(k[1:])
if rows:
    print("| model | batch | threads | Vario p50 / throughput | PyTorch p50 / throughput | Vario/PyTorch | Vario % peak | PyTorch % peak |")
    print("|---|---|---|---|---|---|---|---|")
    for m, b, t in rows:
        vc, v = cell(R.get(f"vario {m} {b} {t}"))
        tc, p = cell(R.get(f"torch {m} {b} {t}"))
        ratio = f"{v['throughput'] / p['throughput']:.2f}x" if v and p else "–"
        vp = f"{100 * v['gflops'] / peak:.1f}%" if v and v.get("gflops") else "–"
        tp = f"{100 * p['gflops'] / peak:.1f}%" if p else "–"
        print(f"| {m} | {b} | {t} | {vc} | {tc} | {ratio} | {vp} | {tp} |")
    print()

fm = sorted({tag.split()[1] for tag in R if tag.startswith("torch-fm ")},
            key=lambda m: R[f"torch-fm {m} {fb} {ft}"].get("flops_per_sample", 0))
if fm:
    print(f"Fashion-MNIST family, batch {fb}, {ft} thread(s); accuracy on the "
          "1000-image validation set (models/fmnist-data/val_*.npy).")
    print()
    print("| model | PyTorch fp32 /s | precision | Vario /s | speed-up vs Vario fp32 | accuracy | change vs fp32 |")
    print("|---|---|---|---|---|---|---|")
    for m in fm:
        t = R.get(f"torch-fm {m} {fb} {ft}")
        tt = f"{t['throughput']:.0f}" if t and "error" not in t else "n/a"
        base = R.get(f"vario-fm {m} {fb} {ft} fp32")
        base_acc = R.get(f"acc {m} fp32")
        for p in ("fp32", "bf16", "int8"):
            v = R.get(f"vario-fm {m} {fb} {ft} {p}")
            a = R.get(f"acc {m} {p}")
            vt = f"{v['throughput']:.0f}" if v and "error" not in v else \
                "n/a: " + (v or {}).get("error", "not run").replace("|", "/")
            sp = (f"{v['throughput'] / base['throughput']:.2f}x"
                  if v and base and "error" not in v and "error" not in base else "–")
            ac = f"{a['accuracy']:.1f}%" if a and "error" not in a else "n/a"
            dc = (f"{a['accuracy'] - base_acc['accuracy']:+.1f} pt"
                  if a and base_acc and "error" not in a and "error" not in base_acc else "–")
            print(f"| {m} | {tt if p == 'fp32' else ''} | {p} | {vt} | {sp} | {ac} | {dc} |")
EOF
