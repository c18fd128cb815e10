# Set-up shared by the live pipeline benchmarks (bench/loki_live.sh,
# bench/inferline_live.sh): both serve the example pipeline
# (models/pipelines/fashion_scenes) from a fresh store and follow the
# pipeline policy's history; only the policy, its flags and the load
# differ. Source it after scripts/lib.sh, with root, V (the vario binary)
# and OUT (the output folder) set; do not run it.

# Fresh $OUT/store.db and $OUT/repo holding the classifiers fmnist_linear,
# fmnist_mlp and CLASSIFIER (app fashion) and the three detectors (app
# fscenes_detect, their declared accuracy from config.json), and
# $OUT/admin.token: vr_pipeline_live_register CLASSIFIER
# OUT may hold other files (OUT=. is the cwd): only what these scripts
# write there is removed first.
vr_pipeline_live_register() {
  local p="$root/models/pipelines/fashion_scenes" d="$root/models/fmnist-data" m acc
  local flags=(--threads 1 --max-batch 4 --runs 10 --precisions fp32 --quiet)
  mkdir -p "$OUT"
  rm -rf "$OUT/store.db" "$OUT/store.db-wal" "$OUT/store.db-shm" "$OUT/store.db-journal" \
    "$OUT/repo" "$OUT/admin.token" "$OUT/serve.log" "$OUT/probe.log" "$OUT/load.done" \
    "$OUT/phases.csv" "$OUT/final.json" "$OUT/loki_live.csv" "$OUT/inferline_live.csv" \
    "$OUT"/bench_[0-9]*.json "$OUT"/bench_[0-9]*.err
  echo "== register (fmnist_linear, fmnist_mlp, $1; the three detectors)"
  for m in fmnist_linear fmnist_mlp "$1"; do
    "$V" register --store "$OUT/store.db" --repo "$OUT/repo" --app fashion \
      --model "$root/models/fmnist/$m/model.onnx" --input "$d/val_inputs.npy" \
      --labels "$d/val_labels.npy" "${flags[@]}"
  done
  for m in fscenes_det_tiny fscenes_det_small fscenes_det_large; do
    acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$p/$m/config.json'))['accuracy'])")
    "$V" register --store "$OUT/store.db" --repo "$OUT/repo" --app fscenes_detect \
      --model "$p/$m/model.onnx" --name "$m" --declared-accuracy "$acc" "${flags[@]}"
  done
  vr_admin_token "$OUT/admin.token"
}

# Starts `vario serve` on $OUT with CORES cores, the admin token and the
# given policy flags (log: $OUT/serve.log), stops it (SIGINT: it drains)
# on exit, registers the pipeline and gives it 2 s to settle. Sets SERVER
# (its pid) and PORT: vr_pipeline_live_serve [SERVE FLAGS...]
vr_pipeline_live_serve() {
  "$V" serve --repo "$OUT/repo" --store "$OUT/store.db" --port 0 --grpc-port -1 \
    --cores "$CORES" --admin-token-file "$OUT/admin.token" "$@" >"$OUT/serve.log" 2>&1 &
  SERVER=$!
  trap 'kill -INT $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
  PORT=$(vr_listen_port "$OUT/serve.log")
  "$V" pipeline register "$root/models/pipelines/fashion_scenes/pipeline.json" \
    --port "$PORT" >/dev/null
  sleep 2
}

# One phase of load: `vario bench` on the pipeline with the given flags
# (32 connections, binary payloads from sample.npy; its JSON in
# $OUT/bench_I.json, its stderr in $OUT/bench_I.err), then appends the line
# PREFIX,<each of KEYS>,slo_attainment,p99_ms to $OUT/phases.csv; fails
# (showing that stderr) when vario bench does:
# vr_pipeline_live_phase I PREFIX "KEYS" [BENCH FLAGS...]
vr_pipeline_live_phase() {
  local i=$1 prefix=$2 keys=$3 rc=0
  shift 3
  "$V" bench --port "$PORT" --pipeline fashion_scenes "$@" --connections 32 --binary \
    --payloads 8 --input "$root/models/pipelines/fashion_scenes/sample.npy" --json \
    --no-progress 2>"$OUT/bench_$i.err" >"$OUT/bench_$i.json" || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$OUT/bench_$i.err" >&2
    echo "phase $i: vario bench $* failed (exit $rc)" >&2
    return "$rc"
  fi
  /usr/bin/python3 - "$OUT/bench_$i.json" "$prefix" $keys >>"$OUT/phases.csv" <<'PYEOF'
import json, sys
b = json.load(open(sys.argv[1]))
print(",".join([sys.argv[2]] + [str(b[k]) for k in sys.argv[3:]]
               + [f"{b['slo_attainment']:.4f}", f"{b['p99_us'] / 1000:.1f}"]))
PYEOF
}

# The load in the background: runs the given command in a subshell that
# touches $OUT/load.done however it ends (the history follower stops on
# it); sets LOAD (its pid): vr_pipeline_live_load COMMAND...
vr_pipeline_live_load() {
  rm -f "$OUT/load.done"
  (
    trap 'touch "$OUT/load.done"' EXIT
    "$@"
  ) &
  LOAD=$!
}

# Waits for the load in the background (pid LOAD) and prints the client's
# per-phase table, $OUT/phases.csv; fails when the load did.
vr_pipeline_live_phases() {
  local rc=0
  wait "$LOAD" || rc=$?
  echo "== per phase (client side): $OUT/phases.csv"
  column -s, -t <"$OUT/phases.csv" 2>/dev/null || cat "$OUT/phases.csv"
  if [ "$rc" -ne 0 ]; then
    echo "the load failed (exit $rc): see the phase's error above" >&2
    return "$rc"
  fi
}
