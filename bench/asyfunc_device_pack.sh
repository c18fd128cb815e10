#!/usr/bin/env bash
# Packs what bench/asyfunc_device.sh needs on a bare machine (no network,
# no Debian packages, a different libc maybe) into one folder that fits the
# device tool's 64 MiB carry limit (issue 17):
#   DEST/bin/vario            wrapper: runs bin/vario.real through the
#                             carried dynamic loader and libraries
#   DEST/bin/vario.real, DEST/lib/*   the binary and every shared library
#                             ldd lists for it (libc and ld-linux included)
#   DEST/bin/vario-shadow     the same for the shadow process's executable
#   DEST/models/<m>/model.onnx.gz  each zoo model with its float weights
#                             zeroed (tools/zoo/zero_weights.py: same graph,
#                             shapes, bytes and kernel times; gzip shrinks
#                             vgg16's 528 MB to ~1 MB)
#   DEST/models/af_cnn.onnx   the live test's CNN (tests/data/asyfunc/
#                             gen_model.py, needs protoc: generated here),
#                             weights zeroed too
# and all of it again as DEST.tar.gz (~30 MB: the libraries alone are
# ~90 MB unpacked, oneDNN 38 MB), which is what to carry:
#   bench/asyfunc_device.sh --pack DEST.tar.gz OUT_DIR
#   bench/asyfunc_device_pack.sh [BUILD_DIR] [DEST] [MODEL ...]
#   defaults: build, out/afdev, mobilenet_v2 resnet50 vgg16 alexnet
#   (MODEL "none": no zoo model, for the live comparison alone)
# Models missing from models/zoo are exported first (python3-torch).
set -euo pipefail
BUILD=${1:-build}
DEST=${2:-out/afdev}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
MODELS=${*:-mobilenet_v2 resnet50 vgg16 alexnet}
[ "$MODELS" = none ] && MODELS=   # the live test's CNN only
cd "$(dirname "$0")/.."
[ -x "$BUILD/vario" ] || { echo "asyfunc_device_pack: no $BUILD/vario" >&2; exit 1; }
rm -rf "$DEST" "$DEST.tar.gz"
mkdir -p "$DEST/bin" "$DEST/lib" "$DEST/models"
cp "$BUILD/vario" "$DEST/bin/vario.real"
# the small shadow executable, when built (cli/shadow/main.c)
shadow=; [ -x "$BUILD/vario-shadow" ] && shadow=$BUILD/vario-shadow
[ -n "$shadow" ] && cp "$shadow" "$DEST/bin/vario-shadow.real"
strip "$DEST"/bin/*.real 2>/dev/null || true
# every library the loader resolves, the loader itself included
ldd "$BUILD/vario" $shadow | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | sort -u |
  while read -r lib; do cp -L "$lib" "$DEST/lib/"; done
ld=$(cd "$DEST/lib" && ls ld-linux-*.so.* | head -1)
strip --strip-unneeded "$DEST"/lib/*.so* 2>/dev/null || true
cat > "$DEST/bin/vario" <<WRAP
#!/bin/sh
# vario through the carried loader and libraries (asyfunc_device_pack.sh)
d=\$(dirname "\$(readlink -f "\$0")")/..
# the loader is /proc/self/exe here: helpers (vario shadow) start this wrapper
VARIO_EXE="\$d/bin/vario" exec "\$d/lib/$ld" --library-path "\$d/lib" "\$d/bin/vario.real" "\$@"
WRAP
chmod +x "$DEST/bin/vario"
"$DEST/bin/vario" version >/dev/null
if [ -n "$shadow" ]; then # found beside bin/vario by base/proc.c's vr_proc_shadow_exe
  cat > "$DEST/bin/vario-shadow" <<WRAP
#!/bin/sh
# vario-shadow through the carried loader and libraries (asyfunc_device_pack.sh)
d=\$(dirname "\$(readlink -f "\$0")")/..
exec "\$d/lib/$ld" --library-path "\$d/lib" "\$d/bin/vario-shadow.real" "\$@"
WRAP
  chmod +x "$DEST/bin/vario-shadow"
  "$DEST/bin/vario-shadow" --help >/dev/null
fi
for m in $MODELS; do
  onnx=models/zoo/$m/model.onnx
  if [ ! -f "$onnx" ]; then
    nice -n 10 /usr/bin/python3 tools/zoo/export_torchvision.py "$m" >&2
  fi
  mkdir -p "$DEST/models/$m"
  nice -n 10 /usr/bin/python3 tools/zoo/zero_weights.py "$onnx" "$DEST/models/$m/model.onnx"
  gzip -9 "$DEST/models/$m/model.onnx"
done
/usr/bin/python3 tests/data/asyfunc/gen_model.py "$DEST/models/af_cnn.raw.onnx" \
  --size 64 --channels 48 --hidden 256
/usr/bin/python3 tools/zoo/zero_weights.py "$DEST/models/af_cnn.raw.onnx" "$DEST/models/af_cnn.onnx"
rm "$DEST/models/af_cnn.raw.onnx"
tar -C "$(dirname "$DEST")" -czf "$DEST.tar.gz" "$(basename "$DEST")"
du -sh "$DEST" "$DEST"/* "$DEST.tar.gz" >&2
echo "packed $DEST.tar.gz: carry it, then on the device machine:"
echo "  bench/asyfunc_device.sh --pack $DEST.tar.gz \$OUT"
