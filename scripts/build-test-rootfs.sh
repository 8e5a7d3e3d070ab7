#!/usr/bin/env bash
# Build (once) a real Debian bookworm root filesystem for imagelint's tests and benchmarks.
#
# Usage: scripts/build-test-rootfs.sh [DEST]
# DEST defaults to ${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}/bookworm.
# The tree is built in a temporary sibling and renamed into place only when debootstrap succeeded,
# so an interrupted build never leaves a half-made image that later runs would trust. Builders take
# an exclusive lock (flock on DEST.lock) and look again once they hold it, so two test runs on one
# machine build it once, and a finished tree that another run may be reading is never removed.
# Prints the path of the finished tree on stdout.
set -euo pipefail

cache="${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}"
dest="${1:-$cache/bookworm}"

if [ -f "$dest/.imagelint-rootfs-complete" ]; then
    echo "$dest"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "build-test-rootfs: debootstrap needs root" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "build-test-rootfs: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

# Use the mirror this machine's apt is configured with.
mirror=$(apt-get indextargets --format '$(URI)' 'Created-By: Packages' 2>/dev/null \
    | sed -n 's#/dists/.*##p' | head -n 1)
mirror="${mirror:-http://deb.debian.org/debian}"

mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
if [ -f "$dest/.imagelint-rootfs-complete" ]; then  # another run built it while we waited
    echo "$dest"
    exit 0
fi
tmp="$dest.partial.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,openssh-server,cron \
    bookworm "$tmp" "$mirror" >&2
# Drop the downloaded .debs: they are build cache, not part of the image under test.
rm -f "$tmp"/var/cache/apt/archives/*.deb
touch "$tmp/.imagelint-rootfs-complete"
# Only an incomplete leftover (an interrupted older build) can be in the way: no run trusts it.
if [ -e "$dest" ]; then
    mv "$dest" "$dest.stale.$$"
    rm -rf "$dest.stale.$$"
fi
mv -T "$tmp" "$dest"
trap - EXIT
echo "$dest"
