#!/usr/bin/env bash
# Runs the unit tests under valgrind memcheck (gcc Debug build, no
# sanitizers: valgrind and ASan do not mix). Fails on any memory error or
# definite leak. Not part of `make check` (it takes minutes); run with
# `make valgrind`. Possibly-lost blocks from libgomp's thread pool (TLS of
# OpenMP workers that live until exit) are expected and not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-valgrind}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$B" -j "$(nproc)"
export VR_SOURCE_DIR=$PWD VR_BINARY_DIR=$PWD/$B
fail=0
# unit_test_control_register is left out: while profiling variants it runs
# oneDNN JIT kernels that valgrind reports as 32-byte reads just past a
# scratchpad block oneDNN allocated itself (frames inside JIT code and
# libdnnl only; valgrind runs the AVX2 kernels, as it lacks AVX-512).
# Not in Vario's code; not investigated further.
for t in base hist npy policy store sim_ilp runtime runtime_int8 engine \
         engine_threads; do
  exe=$B/tests/unit/unit_test_$t
  [ -x "$exe" ] || continue
  if valgrind -q --error-exitcode=9 --leak-check=full \
       --errors-for-leak-kinds=definite "$exe" >"$B/valgrind_$t.log" 2>&1; then
    echo "valgrind: $t clean"
  else
    echo "valgrind: $t FAILED (see $B/valgrind_$t.log)"; fail=1
  fi
done
exit $fail
