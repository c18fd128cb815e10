#!/usr/bin/env bash
# Static analysis of the C sources under src/ (not tests/, not the
# generated protobuf-c code), by hand, not in CI:
#   scripts/static-analysis.sh [OUT_DIR] [TOOL...]
#   OUT_DIR  where the reports go (default /tmp/vario-sa); its build
#            trees are build-scan and build-fanalyzer
#   TOOL     scan-build, fanalyzer, cppcheck (default: all three)
# Needs clang-tools (scan-build), gcc 12+ and cppcheck (Debian packages
# clang-tools, gcc, cppcheck); builds with nice -j2.
# What it prints is a list of candidates, most of them false positives:
# the analysers do not see across files, so they take every `return
# vr_errf(...)` (in base/status.c) as a path that may return 0, and
# report the uninitialised or NULL values behind it; read each report.
# Summaries: OUT_DIR/{scan-build,fanalyzer,cppcheck}.txt, one line a
# report; scan-build's HTML under OUT_DIR/scan-build/.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-/tmp/vario-sa}
shift || true
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(scan-build fanalyzer cppcheck)
mkdir -p "$OUT"
cd "$root" || exit 1
# the project's libraries and the CLI: not the tests, fuzzers or benches
targets=(vario vr_base vr_engine vr_policy vr_runtime vr_cluster vr_control vr_server vr_sim)
# alpha checkers worth their noise for this C: string/memory bounds and
# FILE handling (ArrayBoundV2 reported nothing true in a full run)
checkers=alpha.unix.cstring,alpha.unix.Stream,alpha.core.PointerArithm,alpha.security.ReturnPtrRange

# Keeps "file:line:col: warning: ... [checker]" lines of src/, once each.
summarise() { grep -E "^($root/)?src/.*: warning: " "$1" | sed "s|^$root/||" | sort -u; }

for t in "${tools[@]}"; do
  case $t in
    scan-build)
      sb=$(command -v scan-build || command -v scan-build-14) || { echo "no scan-build" >&2; exit 1; }
      b=$OUT/build-scan
      # -Werror off: the compiler behind scan-build is gcc (ccc-analyzer)
      "$sb" -o "$OUT/scan-build" --exclude "$b" -enable-checker "$checkers" \
        cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug -DVR_WERROR=OFF >/dev/null &&
        "$sb" -o "$OUT/scan-build" --exclude "$b" -enable-checker "$checkers" \
          nice cmake --build "$b" -j2 --target "${targets[@]}" -- -k >"$OUT/scan-build.log" 2>&1
      summarise "$OUT/scan-build.log" >"$OUT/scan-build.txt"
      ;;
    fanalyzer)
      b=$OUT/build-fanalyzer
      CC=gcc cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug -DVR_WERROR=OFF \
        -DCMAKE_C_FLAGS=-fanalyzer >/dev/null &&
        nice cmake --build "$b" -j2 --target "${targets[@]}" -- -k >"$OUT/fanalyzer.log" 2>&1
      summarise "$OUT/fanalyzer.log" >"$OUT/fanalyzer.txt"
      ;;
    cppcheck)
      nice cppcheck --enable=warning,portability --inconclusive -q -I include -I src src \
        --template='{file}:{line}:{column}: warning: {message} [{id}]' 2>"$OUT/cppcheck.log"
      summarise "$OUT/cppcheck.log" >"$OUT/cppcheck.txt"
      ;;
    *) echo "static-analysis.sh: unknown tool '$t'" >&2; exit 2 ;;
  esac
  echo "== $t: $(wc -l <"$OUT/$t.txt") reports in $OUT/$t.txt"
done
