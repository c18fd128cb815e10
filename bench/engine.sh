#!/usr/bin/env bash
# Engine benchmark, C side (the PyTorch side-by-side table is
# bench/engine_vs_torch.sh). Prints markdown to stdout:
#   1. machine peak fp32 FLOP/s, measured with an AVX-512 FMA loop
#      (bench_engine_peak), 1 thread and 2 threads at once;
#   2. resnet50 (models/zoo, exported by tools/zoo/export_torchvision.py)
#      latency / throughput / GFLOP/s at batch 1 and 8, threads 1 and 2,
#      and the share of measured peak;
#   3. thread limits: one 1-thread session vs two 1-thread sessions in two
#      threads at once (`vario perf --sessions 2`) vs one 2-thread session;
#   4. Fashion-MNIST family: fp32 / bf16 / int8 throughput and top-1
#      accuracy (vario eval), speed-up (samples per CPU-second, so that
#      other jobs on the machine do not skew it) and accuracy change vs fp32.
#
#   bench/engine.sh BUILD_DIR            (BUILD_DIR holds vario, bench/)
# Environment: ENGINE_SECONDS [3] seconds per measurement;
#              ENGINE_MODEL [models/zoo/resnet50/model.onnx]
#              FMNIST_BATCH [16]
set -uo pipefail
BUILD=${1:?usage: bench/engine.sh BUILD_DIR}
cd "$(dirname "$0")/.."
V="$BUILD/vario"
S=${ENGINE_SECONDS:-3}
M=${ENGINE_MODEL:-models/zoo/resnet50/model.onnx}
FB=${FMNIST_BATCH:-16}
[ -x "$V" ] || { echo "no $V: build first"; exit 1; }

jget() { # KEY JSON -> value
  sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2" | tr -d '"'
}

echo "## Engine benchmark ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
peak_json=$("$BUILD/bench/bench_engine_peak" 2 2)
p1=$(jget peak_gflops_1thread "$peak_json")
p2=$(jget peak_gflops_total "$peak_json")
pc=$(jget peak_gflops_per_cpu_second "$peak_json")
echo "Measured peak fp32: ${pc} GFLOP per CPU-second (one core's peak, independent of other"
echo "load); wall-clock ${p1} GFLOP/s on 1 thread, ${p2} GFLOP/s on 2 threads at once"
echo "(\`$BUILD/bench/bench_engine_peak 2 2\`: 12 independent AVX-512 FMA chains per thread)."
echo

if [ -f "$M" ]; then
  echo "### $(basename "$(dirname "$M")") fp32"
  echo
  echo "| batch | threads | p50 ms | p99 ms | samples/s | GFLOP/s | cores busy | GFLOP per CPU-s | % of core peak |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for b in 1 8; do
    for t in 1 2; do
      j=$("$V" perf "$M" --batch $b --threads $t --duration "$S" --json 2>&1)
      g=$(jget gflops "$j"); gc=$(jget gflops_per_core "$j")
      share=$(awk -v g="$gc" -v p="$pc" 'BEGIN { if (p > 0) printf "%.0f", 100 * g / p }')
      echo "| $b | $t | $(jget p50_ms "$j") | $(jget p99_ms "$j") | $(jget throughput "$j") | $g | $(jget cpu_cores "$j") | $gc | $share |"
    done
  done
  echo
  echo "### Thread limits ($(basename "$(dirname "$M")"), batch 1)"
  echo
  echo "| configuration | samples/s | cores busy |"
  echo "|---|---|---|"
  one=$("$V" perf "$M" --threads 1 --duration "$S" --json)
  two=$("$V" perf "$M" --threads 1 --sessions 2 --duration "$S" --json)
  wide=$("$V" perf "$M" --threads 2 --duration "$S" --json)
  echo "| one 1-thread session | $(jget throughput "$one") | $(jget cpu_cores "$one") |"
  echo "| two 1-thread sessions, two threads at once | $(jget throughput "$two") | $(jget cpu_cores "$two") |"
  echo "| one 2-thread session | $(jget throughput "$wide") | $(jget cpu_cores "$wide") |"
  echo
else
  echo "($M missing: run /usr/bin/python3 tools/zoo/export_torchvision.py resnet50)"
  echo
fi

if [ -d models/fmnist ]; then
  echo "### Fashion-MNIST family: precisions (batch $FB, 1 thread)"
  echo
  echo "| model | precision | samples/s | samples per CPU-s | speed-up | top-1 | change |"
  echo "|---|---|---|---|---|---|---|"
  D=models/fmnist-data
  for d in models/fmnist/*/; do
    n=$(basename "$d")
    f32=""; a32=""
    for p in fp32 bf16 int8; do
      j=$("$V" perf "$d/model.onnx" --batch "$FB" --precision $p --calibration $D/calib_inputs.npy \
          --duration "$S" --json 2>&1)
      e=$("$V" eval "$d/model.onnx" --input $D/val_inputs.npy --labels $D/val_labels.npy \
          --precision $p --calibration $D/calib_inputs.npy --json 2>&1)
      thr=$(jget throughput "$j"); acc=$(jget accuracy "$e")
      # Per CPU-second: robust when other jobs take part of the cores.
      tc=$(awk -v t="$thr" -v c="$(jget cpu_cores "$j")" 'BEGIN { if (c > 0) printf "%.0f", t / c }')
      [ $p = fp32 ] && { f32=$tc; a32=$acc; }
      sp=$(awk -v a="$tc" -v b="$f32" 'BEGIN { if (b > 0) printf "%.2fx", a / b }')
      ch=$(awk -v a="$acc" -v b="$a32" 'BEGIN { printf "%+.1f pt", (a - b) }')
      echo "| $n | $p | $thr | $tc | $sp | $acc | $ch |"
    done
  done
fi
