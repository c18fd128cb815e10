#!/usr/bin/env bash
# AsyFunc live (issue 17): `vario serve --policy asyfunc` under a rate step
# over loopback, with shadows (AsyFunc) and without (AsyFunc-, --af-kappa
# 0), on the test CNN (tests/data/asyfunc/gen_model.py: light, CPU-heavy
# convolutions and a heavy FC head). Prints one line per mode:
#   mode=<m> sent= ok= dropped= attainment= p99_ms= errors= shadows_attached=
#   shadows_released= paired_batches= shadow_rows= shadow_load_ms=
#   max_shadow_cores= provision_ms_max= provision_ms_median=
#   shadow_share_base= shadow_share_step= shadow_share_after=
# (provision: a routed query finding the bodies crowded -> the shadow
# paired, vario_shadow_provision_ms as sampled)
# (share: the fraction of 20 ms metric samples with a shadow attached, in
# the base phase, the step, and the last base phase after its first second)
# then the checks of tests/integration/asyfunc_live.py.
#   bench/asyfunc_live.sh [BUILD_DIR] [--shadow-process] [--seconds S]
#                         [--slo-ms X] [--base Q] [--burst Q] [--burst-x F]
#                         [--cores N] [--cmax K] [--period-ms P]
#   (--cores/--cmax: the server's cores and the most a shadow may get, 2
#   and 2 by default; on a many-core machine e.g. --cores 16 --cmax 8)
set -euo pipefail
BUILD=${1:-build}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/.."
echo "# $(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
exec /usr/bin/python3 tests/integration/asyfunc_live.py "$BUILD/vario" "$PWD" "$@"
