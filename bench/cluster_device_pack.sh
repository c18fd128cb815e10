#!/usr/bin/env bash
# Packs what bench/cluster_device.sh needs on a machine that has nothing
# installed (issue 18): the vario binary, redis-server, every shared
# library both link (found with ldd, the dynamic loader included, so the
# target's own libc does not matter), the optional bench_cluster_routes,
# the script itself and the committed models and inputs it reads. The
# binaries run through wrappers that exec the packed loader with the
# packed libraries. Run from the repository root:
#   bench/cluster_device_pack.sh BUILD PACK.tar.gz [REDIS_SERVER]
# then on the target (x86-64 Linux with bash, coreutils, grep, sed, awk,
# tar and gzip; taskset to pin):
#   mkdir -p /tmp/vp && tar -xzf PACK.tar.gz -C /tmp/vp && cd /tmp/vp &&
#   bash bench/cluster_device.sh . OUTDIR ./redis-server
# (about 40 MB compressed; ~100 MB unpacked).
set -euo pipefail
BUILD=${1:?usage: bench/cluster_device_pack.sh BUILD PACK.tar.gz [REDIS_SERVER]}
PACK=${2:?usage: bench/cluster_device_pack.sh BUILD PACK.tar.gz [REDIS_SERVER]}
REDIS=${3:-$(command -v redis-server || true)}
[ -x "$BUILD/vario" ] || { echo "no $BUILD/vario" >&2; exit 2; }
[ -n "$REDIS" ] || { echo "no redis-server (give its path)" >&2; exit 2; }
[ -f bench/cluster_device.sh ] || { echo "run from the repository root" >&2; exit 2; }
P=$(mktemp -d)
trap 'rm -rf "$P"' EXIT
mkdir -p "$P/.pack/bin" "$P/.pack/lib" "$P/bench" "$P/models/fmnist" "$P/models/fmnist-data"
bins=("$BUILD/vario" "$REDIS")
[ -x "$BUILD/bench/bench_cluster_routes" ] && bins+=("$BUILD/bench/bench_cluster_routes")
for b in "${bins[@]}"; do
  cp -L "$b" "$P/.pack/bin/"
  ldd "$b" | awk '/=>/ && $3 ~ /^\// {print $3} /^[[:space:]]*\/.*ld-linux/ {print $1}' |
    while read -r l; do cp -Ln "$l" "$P/.pack/lib/"; done
done
LOADER=$(cd "$P/.pack/lib" && ls ld-linux-*.so.* | head -1)
wrap() { # NAME DEST
  cat > "$2" <<EOF
#!/bin/sh
# $1 through the packed loader and libraries (bench/cluster_device_pack.sh)
d=\$(cd "\$(dirname "\$0")" && pwd)
while [ ! -d "\$d/.pack" ]; do d=\$(dirname "\$d"); done
exec "\$d/.pack/lib/$LOADER" --library-path "\$d/.pack/lib" "\$d/.pack/bin/$1" "\$@"
EOF
  chmod +x "$2"
}
wrap vario "$P/vario"
wrap "$(basename "$REDIS")" "$P/redis-server"
[ -x "$P/.pack/bin/bench_cluster_routes" ] && wrap bench_cluster_routes "$P/bench/bench_cluster_routes"
cp bench/cluster_device.sh "$P/bench/"
cp -r models/fmnist/fmnist_linear models/fmnist/fmnist_cnn_s "$P/models/fmnist/"
cp models/fmnist-data/val_inputs.npy "$P/models/fmnist-data/"
"$P/vario" version >/dev/null || { echo "the packed vario does not run here" >&2; exit 1; }
tar -C "$P" -czf "$PACK" .
echo "$PACK: $(du -h "$PACK" | cut -f1) ($(ls "$P/.pack/lib" | wc -l) libraries, loader $LOADER)"
