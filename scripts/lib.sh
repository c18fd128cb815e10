# Shell helpers shared by scripts/demo.sh, bench/*.sh and the shell tests;
# source it (`. "$root/scripts/lib.sh"`), do not run it.

# Makes a scratch directory $tmp and an empty $srv; on exit stops the
# server whose pid is in $srv (SIGINT: it drains) and removes $tmp.
vr_scratch_with_server() {
  tmp=$(mktemp -d)
  srv=""
  trap vr_scratch_cleanup EXIT
}
vr_scratch_cleanup() {
  if [ -n "$srv" ]; then kill -INT "$srv" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$tmp"
}

# Prints the port `vario serve --port 0` logged to LOG, waiting up to 10 s;
# fails (showing the log on stderr) if it never did, or at once when the
# server's PID is given and it has exited: vr_listen_port LOG [PID]
vr_listen_port() {
  local p="" _
  for _ in $(seq 100); do
    p=$(sed -n 's/.*listening on https*:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$1")
    if [ -n "$p" ]; then echo "$p"; return 0; fi
    if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then break; fi
    sleep 0.1
  done
  cat "$1" >&2
  echo "server did not start" >&2
  return 1
}

# Waits until the server PID, which logs to LOG, answers
# /v2/health/ready on PORT (up to 30 s); fails, showing the log on stderr,
# if it exits first or never does: vr_wait_ready PID PORT LOG
vr_wait_ready() {
  local _
  for _ in $(seq 300); do
    if ! kill -0 "$1" 2>/dev/null; then
      cat "$3" >&2
      echo "server exited" >&2
      return 1
    fi
    curl -sf "http://127.0.0.1:$2/v2/health/ready" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$3" >&2
  echo "server not ready after 30 s" >&2
  return 1
}

# Registers every model under ROOT/models/fmnist for app "fashion" with the
# committed validation set: vr_register_fmnist VARIO ROOT STORE REPO
# [more `vario register` flags].
vr_register_fmnist() {
  local vario=$1 root=$2 store=$3 repo=$4 dir
  shift 4
  for dir in "$root"/models/fmnist/*/; do
    dir=${dir%/}
    [ -f "$dir/model.onnx" ] || continue
    "$vario" register --quiet --store "$store" --repo "$repo" --app fashion \
      --model "$dir/model.onnx" --input "$root/models/fmnist-data/val_inputs.npy" \
      --labels "$root/models/fmnist-data/val_labels.npy" "$@"
  done
}

# Writes a fresh random admin token to FILE (mode 600) and exports it as
# VARIO_ADMIN_TOKEN: `vario serve --admin-token-file FILE` then accepts
# state-changing requests from clients that send it (vario bench does;
# curl -H "Authorization: Bearer $VARIO_ADMIN_TOKEN"). docs/SECURITY.md.
vr_admin_token() {
  (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1")
  VARIO_ADMIN_TOKEN=$(cat "$1")
  export VARIO_ADMIN_TOKEN
}
