#!/usr/bin/env bash
# Runs the benchmarks of docs/BENCHMARKS.md that run unattended on this
# machine, each with its own arguments (`make bench` calls it after the
# Release build): scripts/bench.sh [BUILD_DIR] [DATA_DIR]
#   BUILD_DIR  the build holding vario and bench/ (default build)
#   DATA_DIR   the shared data sets (default ../shared/data next to this
#              checkout); the benchmarks that need them skip when absent
# Every benchmark runs even when an earlier one failed; a summary comes
# last and the exit status is 1 when any failed (exit 77 is a skip).
# Not run here (see docs/BENCHMARKS.md for their commands): the device
# benchmarks and their packers (asyfunc_device*.sh, cluster_device*.sh:
# another machine), install_time.sh (root, debootstrap and the Debian
# mirror), fscenes_data.sh (re-measures a committed data set), and the
# plots (loki_plot.sh, asyfunc_plot.sh: of a run kept with OUT=DIR).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
BUILD=$(abs "${1:-build}")
DATA=$(abs "${2:-$(dirname "$root")/shared/data}")
cd "$root" || exit 1
[ -x "$BUILD/vario" ] || { echo "bench.sh: no $BUILD/vario (build first)" >&2; exit 1; }

failed=() skipped=()
run() { # NAME COMMAND...: runs one benchmark, records how it ended
  local name=$1 rc=0
  shift
  echo "== $name: $*"
  "$@" || rc=$?
  case $rc in
    0) ;;
    77) skipped+=("$name") ;;
    *) failed+=("$name (exit $rc)") ;;
  esac
}

# engine
run engine_zoo_check bench/engine_zoo_check.sh "$BUILD"
run engine bench/engine.sh "$BUILD"
run engine_vs_torch bench/engine_vs_torch.sh "$BUILD"
# serving (loopback)
run serve bench/serve.sh "$BUILD"
run overload_shedding bench/overload_shedding.sh "$BUILD"
run overload_apps bench/overload_apps.sh "$BUILD"
# simulator
run sim_speed bench/sim_speed.sh "$BUILD/vario"
run autoscale_step bench/autoscale_step.sh "$BUILD/vario"
run sim_validate bench/sim_validate.sh "$BUILD"
run sim_validate_infaas bench/sim_validate_infaas.sh "$BUILD"
# pipelines
run fscenes_sim bench/fscenes_sim.sh "$BUILD"
run loki_live bench/loki_live.sh "$BUILD"
run inferline_live bench/inferline_live.sh "$BUILD"
# pipelines on the shared data (loki_repro exits 77 without it,
# inferline_repro 0 with "skipped" on stderr)
run loki_repro env VARIO="$BUILD/vario" bench/loki_repro.sh "$DATA/loki" traffic_analysis
run inferline_repro env BIN="$BUILD/bench/bench_inferline_repro" \
  bench/inferline_repro.sh "$DATA/loki" traffic_analysis
# AsyFunc (2 cores here: CMAX=2)
run asyfunc_repro bench/asyfunc_repro.sh "$BUILD"
run asyfunc_live bench/asyfunc_live.sh "$BUILD"
# cluster (loopback; redis-server from `scripts/setup-deps.sh bench`)
run cluster_overhead bench/cluster_overhead.sh "$BUILD"
run cluster_routes bench/cluster_routes.sh "$BUILD"
run cluster_pipeline bench/cluster_pipeline.sh "$BUILD"
run registry bench/registry.sh "$BUILD"

echo "== bench.sh: ${#failed[@]} failed, ${#skipped[@]} skipped"
for f in "${failed[@]}"; do echo "failed: $f"; done
for s in "${skipped[@]}"; do echo "skipped: $s"; done
[ ${#failed[@]} -eq 0 ]
