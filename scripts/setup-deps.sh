#!/usr/bin/env bash
# Installs the Debian packages a Vario make target needs, and only those.
# Idempotent: packages already installed are skipped, and apt is not touched
# at all when nothing is missing.
#
#   scripts/setup-deps.sh [GROUP...]     default group: build
#     build   compile vario (Release): compilers, oneDNN, protobuf-c, ONNX
#             protos, jansson, libmicrohttpd, gRPC core, SQLite, hiredis
#             (the Redis store/registry client), libcurl (the kubernetes
#             worker provider), CBC; python3 + numpy
#             (the demo and test scripts read .npy files with numpy)
#     demo    build + gnuplot (make demo)
#     check   build + clang, sanitizer runtimes, cmocka, ONNX test data
#             (make check), curl + openssl (the TLS tests), redis-server
#             (store parity and registry tests start their own),
#             python3-yaml (the Kubernetes manifests test)
#     zoo     python3-torch, torchvision, onnx and the Fashion-MNIST data set
#             (make zoo: tools/zoo, which (re)trains and exports models)
#     bench   zoo + what the benchmarks compare against (make bench)
#     cluster redis-server (make demo-cluster; the cluster tests skip
#             without it)
#   --bench is the old spelling of `bench`.
#   SETUP_DEPS_PRINT=1 prints the package list instead of installing.
#   SETUP_DEPS_LOCK_WAIT_S (default 600): how long apt-get waits for the
#   dpkg/lists locks another apt holds before giving up.
set -euo pipefail

build=(
  build-essential cmake pkg-config
  libdnnl-dev
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev
  libjansson-dev libmicrohttpd-dev libsqlite3-dev libgrpc-dev libhiredis-dev
  libcurl4-openssl-dev zlib1g-dev
  coinor-libcbc-dev
  python3 python3-numpy
)
# chromium: the dashboard screenshot (make demo) and its browser test
demo=(gnuplot-nox chromium)
# python3-grpcio + protoc: the gRPC test's client (not the server's code);
# curl + openssl: the TLS test
check=(clang libclang-rt-dev libcmocka-dev libonnx-testdata gnuplot-nox
       python3-grpcio python3-protobuf protobuf-compiler curl openssl chromium
       redis-server python3-yaml)
zoo=(python3-torch python3-torchvision python3-onnx dataset-fashion-mnist)
# redis-server: bench/registry.sh (store writes, routing propagation)
bench=("${zoo[@]}" gnuplot-nox libevent-dev wrk hyperfine valgrind redis-server)
cluster=(redis-server)

pkgs=("${build[@]}")
for g in "$@"; do
  case "$g" in
    build) ;;
    demo) pkgs+=("${demo[@]}") ;;
    check) pkgs+=("${check[@]}") ;;
    zoo) pkgs+=("${zoo[@]}") ;;
    bench|--bench) pkgs+=("${bench[@]}") ;;
    cluster) pkgs+=("${cluster[@]}") ;;
    *) echo "setup-deps: unknown group '$g' (build demo check zoo bench cluster)" >&2; exit 2 ;;
  esac
done

if [ -n "${SETUP_DEPS_PRINT:-}" ]; then
  printf '%s\n' "${pkgs[@]}" | sort -u
  exit 0
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
# Another apt (unattended-upgrades, a second make target) may hold the locks.
# DPkg::Lock::Timeout makes apt-get wait for the dpkg lock instead of failing
# at once; `apt-get update` takes the lists lock, which that option does not
# cover, so it is retried while the failure is a lock held by someone else.
lock_wait_s=${SETUP_DEPS_LOCK_WAIT_S:-600}
apt_opts=(-o "DPkg::Lock::Timeout=$lock_wait_s")
apt_update() {
  local deadline=$((SECONDS + lock_wait_s)) err
  err=$(mktemp)
  while true; do
    if $SUDO apt-get "${apt_opts[@]}" update -qq 2>"$err"; then
      cat "$err" >&2; rm -f "$err"; return 0
    fi
    if grep -qiE 'could not get lock|unable to lock' "$err" &&
       [ "$SECONDS" -lt "$deadline" ]; then
      echo "setup-deps: apt lists locked by another process; waiting" >&2
      sleep 5
      continue
    fi
    cat "$err" >&2; rm -f "$err"; return 1
  done
}
apt_update
$SUDO apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}"
