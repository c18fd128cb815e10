#!/usr/bin/env bash
# Large-model correctness check (run by `make bench`; the small Fashion-MNIST
# models are checked in `make check` by unit_test_engine_zoo):
# every models/zoo/<name>/ exported by tools/zoo/export_torchvision.py is run
# by `vario run` on its ref_input.npy and compared with PyTorch's
# ref_output.npy: relative error max|a-b| / max|b| must be <= 1e-4.
#   bench/engine_zoo_check.sh BUILD_DIR
set -uo pipefail
BUILD=${1:?usage: bench/engine_zoo_check.sh BUILD_DIR}
cd "$(dirname "$0")/.."
[ -d models/zoo ] || { echo "models/zoo absent: /usr/bin/python3 tools/zoo/export_torchvision.py"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
echo "| model | relative error | load+run s | verdict |"
echo "|---|---:|---:|---|"
for d in models/zoo/*/; do
  n=$(basename "$d")
  [ -f "$d/model.onnx" ] && [ -f "$d/ref_input.npy" ] || continue
  t0=$(date +%s.%N)
  if ! "$BUILD/vario" run "$d/model.onnx" --input "$d/ref_input.npy" --output "$tmp/$n.npy" 2>"$tmp/err"; then
    echo "| $n | - | - | ERROR: $(head -c 200 "$tmp/err") |"; bad=1; continue
  fi
  t1=$(date +%s.%N)
  line=$(/usr/bin/python3 - "$tmp/$n.npy" "$d/ref_output.npy" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
m = np.abs(b).max()
e = np.abs(a - b).max() / m if m > 0 else np.abs(a - b).max()
note = "" if m > 0 else " (reference is all zeros: absolute error)"
print("%.2e %s%s" % (e, "ok" if a.shape == b.shape and e <= 1e-4 else "FAIL", note))
PY
)
  err=${line%% *}; verdict=${line#* }
  [[ $verdict == ok* ]] || bad=1
  echo "| $n | $err | $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') | $verdict |"
done
exit $bad
