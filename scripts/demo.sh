#!/usr/bin/env bash
# The end-to-end demo (grows with the project): see README.md.
set -euo pipefail
BUILD=${1:-build}
"$BUILD/vario" version
"$BUILD/vario" --help
