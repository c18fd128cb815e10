#!/usr/bin/env bash
# Runs every benchmark under bench/ in turn; see docs/BENCHMARKS.md.
set -euo pipefail
BUILD=${1:-build}
for b in bench/*.sh; do
  [ -e "$b" ] || continue
  echo "== $b"
  bash "$b" "$BUILD"
done
