# Sourced by experiments/inferline/run.sh and spread.sh (POSIX sh), with
# ROOT set to the checkout's root (paths below do not depend on the cwd).
# il_setup WHAT DATA_DIR [OUT]: sets DATA, OUT (default
# ROOT/experiments/results/inferline), BIN, APP (Loki's traffic analysis), FS
# and FACCEL (Vario's example pipeline and its accelerator prices); exits 0
# with "WHAT: skipped" when DATA_DIR lacks the app; builds the bench when
# BIN is missing.
il_setup() {
  what=$1
  shift
  DATA=${1:?usage: $0 DATA_DIR [OUT]}
  OUT=${2:-$ROOT/experiments/results/inferline}
  BIN=${BIN:-$ROOT/build/bench/bench_inferline_repro}
  APP=traffic_analysis
  if [ ! -f "$DATA/apps/$APP.json" ]; then
    echo "$what: skipped: no $DATA/apps/$APP.json" >&2
    exit 0
  fi
  [ -x "$BIN" ] || { cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$ROOT/build" -j "$(nproc)" --target bench_inferline_repro >/dev/null; }
  mkdir -p "$OUT"
  FS=$ROOT/experiments/inferline/fscenes_data
  FACCEL=$(cat "$FS/accel")
}

# field NAME: the value of NAME= on the bench line read from stdin (the
# line starts with a space so the first field matches too)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
