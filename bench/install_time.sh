#!/usr/bin/env bash
# Wall time and package count of `scripts/setup-deps.sh GROUP` (what `make
# demo` / `make check` run first) on a fresh Debian bookworm: a minbase
# chroot made by debootstrap, copied fresh for every run, with the same
# apt sources as the debian:bookworm image (main, updates, security).
# Needs root and the Debian mirror; installs debootstrap from apt if absent.
#
#   bench/install_time.sh WORKDIR [GROUP|before ...]   default: demo check
#
# "before" runs the single-list script of before issue 19 (git 8c9d1c7^),
# which every target used to run. Prints one line per run:
#   group=demo packages=<installed after> added=<new> seconds=<wall> download_mb=<fetched>
# The package cache is emptied between runs, so every run downloads all
# its packages (the mirror and the network are part of the figure).
set -euo pipefail

work=${1:?usage: install_time.sh WORKDIR [GROUP...]}
shift
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(demo check)
src=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "install_time: needs root (chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq debootstrap; }

mkdir -p "$work"
base="$work/base.tar"
if [ ! -f "$base" ]; then
  rm -rf "$work/base"
  debootstrap --variant=minbase bookworm "$work/base" http://deb.debian.org/debian >&2
  cat >"$work/base/etc/apt/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  tar -C "$work/base" -cf "$base" .
  rm -rf "$work/base"
fi

for g in "${groups[@]}"; do
  root="$work/run-$g"
  rm -rf "$root"
  mkdir -p "$root"
  tar -C "$root" -xf "$base"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mkdir -p "$root/vario/scripts"
  if [ "$g" = before ]; then
    git -C "$src" show '8c9d1c7^:scripts/setup-deps.sh' >"$root/vario/scripts/setup-deps.sh"
    args=()
  else
    cp "$src/scripts/setup-deps.sh" "$root/vario/scripts/"
    args=("$g")
  fi
  chmod +x "$root/vario/scripts/setup-deps.sh"
  mount -t proc proc "$root/proc"
  n0=$(chroot "$root" dpkg-query -W -f='${Status}\n' | grep -c 'install ok installed')
  t0=$(date +%s.%N)
  chroot "$root" /bin/bash -c "cd /vario && scripts/setup-deps.sh ${args[*]:-}" \
    >"$work/$g.log" 2>&1 || { umount "$root/proc"; tail "$work/$g.log"; exit 1; }
  t1=$(date +%s.%N)
  n1=$(chroot "$root" dpkg-query -W -f='${Status}\n' | grep -c 'install ok installed')
  mb=$(du -sm "$root/var/cache/apt/archives" | cut -f1)
  umount "$root/proc"
  echo "group=$g packages=$n1 added=$((n1 - n0)) seconds=$(awk "BEGIN{printf \"%.0f\", $t1 - $t0}") download_mb=$mb"
  rm -rf "$root"
done
