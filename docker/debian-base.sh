#!/usr/bin/env bash
# Make a minimal Debian image on an engine that cannot reach an image registry:
# debootstrap a minbase root file system once, cache it as a tarball, `docker import` it.
#
#   docker/debian-base.sh [IMAGE]        # default cardtime-base:bookworm
#
# Environment: SUITE (bookworm), MIRROR (http://deb.debian.org/debian),
# CARDTIME_CACHE (/var/cache/cardtime: the tarball is reused from there; ~45 MB),
# DOCKER (docker). Needs root (debootstrap) only when the tarball is not cached yet.
set -euo pipefail
image=${1:-cardtime-base:bookworm}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${CARDTIME_CACHE:-/var/cache/cardtime}
docker=${DOCKER:-docker}
tarball="$cache/debian-$suite-minbase.tar"

if "$docker" image inspect "$image" >/dev/null 2>&1; then
  echo "base image $image: present"
  exit 0
fi
if [[ ! -s $tarball ]]; then
  command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 2; }
  mkdir -p "$cache"
  rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap $suite (minbase) from $mirror into $rootfs"
  debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log" >&2; echo "debootstrap failed: see $cache/debootstrap.log" >&2; exit 1; }
  # The package lists and .debs debootstrap leaves behind are ~20 MB the image never needs.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" --numeric-owner -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
fi
"$docker" import --change 'CMD ["/bin/bash"]' "$tarball" "$image" >/dev/null
echo "base image $image: imported from $tarball"
