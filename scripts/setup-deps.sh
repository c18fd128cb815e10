#!/usr/bin/env bash
# Installs every Debian package that Vario's build, tests, demo and benchmarks
# need. Idempotent: packages already installed are skipped, and apt is not
# touched at all when nothing is missing.
#
#   scripts/setup-deps.sh            build + test + demo packages
#   scripts/setup-deps.sh --bench    also what the benchmarks compare against
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config clang libclang-rt-dev
  libdnnl-dev
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
  libjansson-dev libmicrohttpd-dev libevent-dev libsqlite3-dev
  coinor-libcbc-dev libcmocka-dev
  gnuplot-nox
  python3 python3-numpy python3-torch python3-torchvision python3-onnx
  dataset-fashion-mnist
)
if [ "${1:-}" = "--bench" ]; then
  pkgs+=(wrk hyperfine valgrind)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
