#!/usr/bin/env bash
# stage-deps.sh — stage gpool's library dependencies for a machine without package manager
# access: downloads the Debian packages (apt-get download: no root needed) of jemalloc, hwloc,
# criterion and what they depend on that a base system may lack, and unpacks them into a
# folder (default .deps/, git-ignored). Then, on the target machine:
#   make gpu-check DEPS_PREFIX=$PWD/.deps        (see gpu/gpu.mk)
# Run it on a Debian/Ubuntu machine of the same release and architecture as the target.
#   scripts/stage-deps.sh [--runtime-only] [DEST]
# --runtime-only: only the shared libraries (enough to run a tree built elsewhere); by default
# the -dev packages come too, so the tree can be built on the target.
set -euo pipefail
cd "$(dirname "$0")/.."
runtime_only=0
if [ "${1:-}" = --runtime-only ]; then runtime_only=1; shift; fi
dest=${1:-.deps}
command -v apt-get >/dev/null && command -v apt-cache >/dev/null && command -v dpkg-deb >/dev/null || {
  echo "stage-deps: needs apt-get, apt-cache and dpkg-deb (a Debian-based machine)" >&2
  exit 1
}
roots=(libjemalloc2 libhwloc15 libcriterion3)
[ $runtime_only = 1 ] || roots+=(libjemalloc-dev libhwloc-dev libcriterion-dev)

# The dependency closure, without what every Debian system has (Priority required/important,
# plus the C runtime) and without virtual packages.
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${roots[@]}" 2>/dev/null | grep -E '^[a-z0-9]' | sort -u)
pkgs=()
for p in $closure; do
  case $p in libc6 | libc6-dev | libgcc-s1 | libstdc++6 | gcc-*-base | libcrypt*) continue ;; esac
  info=$(apt-cache show --no-all-versions "$p" 2>/dev/null) || continue # virtual
  [ -n "$info" ] || continue
  prio=$(sed -n 's/^Priority: //p' <<<"$info" | head -1)
  case $prio in required | important) continue ;; esac
  pkgs+=("$p")
done
echo "stage-deps: ${#pkgs[@]} packages: ${pkgs[*]}" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q "${pkgs[@]}") || {
  echo "stage-deps: apt-get download failed (run apt-get update? network?)" >&2
  exit 1
}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
for deb in "$tmp"/*.deb; do
  dpkg-deb -x "$deb" "$dest"
  basename "$deb" >>"$dest/PACKAGES"
done
sort -u -o "$dest/PACKAGES" "$dest/PACKAGES"
# -dev packages link libfoo.so to the runtime file with absolute or relative links: keep
# relative ones, rewrite absolute ones as relative links inside $dest (an absolute link into
# $dest would break when the tree is copied to the GPU host).
find "$dest" -type l | while read -r l; do
  t=$(readlink "$l")
  case $t in /*) ln -sfnr "$dest$t" "$l" 2>/dev/null || true ;; esac
done
triplet=$(cc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
echo "stage-deps: unpacked into $dest ($(du -sh "$dest" | cut -f1)); libraries in $dest/usr/lib/$triplet" >&2
echo "stage-deps: use it with: make ... DEPS_PREFIX=$dest" >&2
