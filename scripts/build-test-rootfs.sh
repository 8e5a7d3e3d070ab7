#!/usr/bin/env bash
# Build (once) a real Debian bookworm root filesystem for imagelint's tests and benchmarks.
#
# Usage: scripts/build-test-rootfs.sh [--flavour minimal|twin|cloud|vendor|instance|ssh] [DEST]
#   minimal  debootstrap minbase with systemd, dbus, openssh-server and cron (the default)
#   twin     a second, independent debootstrap of the same suite and package list (for the test
#            that two builds of one recipe differ in no unit)
#   instance the minimal tree plus curl (a stock cloud image has curl; the remote collector's
#            upload needs it), to boot with systemd-nspawn as a stand-in instance
#   ssh      the minimal tree plus sudo, to boot as a host reached over SSH by a login that is
#            not root (`imagelint audit ssh://... --sudo`)
#   cloud    the minimal tree plus what cloud and Kubernetes node images carry (cloud-init,
#            docker.io, containerd, collectd, nfs-common, chrony, rsyslog, lvm2, ...), installed
#            the way an image build does it: `apt-get install` inside the tree, services kept from
#            starting by policy-rc.d, so enabled units, presets and postinst side effects are the
#            packages' own
#   vendor   the minimal tree after a "vendor update": prometheus-node-exporter installed with
#            apt inside the tree (its postinst enables its service), nothing else
# DEST defaults to ${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}/bookworm
# (bookworm-twin, bookworm-cloud, bookworm-vendor for the other flavours).
# The tree is built in a temporary sibling and renamed into place only when debootstrap succeeded,
# so an interrupted build never leaves a half-made image that later runs would trust. Builders take
# an exclusive lock (flock on DEST.lock) and look again once they hold it, so two test runs on one
# machine build it once, and a finished tree that another run may be reading is never removed.
# Prints the path of the finished tree on stdout.
set -euo pipefail

flavour=minimal
if [ "${1:-}" = "--flavour" ]; then
    flavour="${2:?--flavour needs minimal, twin, cloud or vendor}"
    shift 2
fi
name=bookworm
extra=()
case "$flavour" in
    minimal) ;;
    twin) name=bookworm-twin ;;
    cloud)
        extra=(cloud-init docker.io containerd collectd-core nfs-common chrony rsyslog lvm2
               sudo curl ca-certificates iproute2 ifupdown logrotate unattended-upgrades)
        name=bookworm-cloud
        ;;
    instance)
        extra=(curl ca-certificates)
        name=bookworm-instance
        ;;
    ssh)
        extra=(sudo)
        name=bookworm-ssh
        ;;
    vendor)
        extra=(prometheus-node-exporter)
        name=bookworm-vendor
        ;;
    *) echo "build-test-rootfs: unknown flavour $flavour (minimal, twin, cloud, vendor, instance or ssh)" >&2; exit 2 ;;
esac
cache="${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}"
dest="${1:-$cache/$name}"

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
cleanup() {
    mountpoint -q "$tmp/proc" 2>/dev/null && umount "$tmp/proc"
    rm -rf "$tmp"
}
trap cleanup EXIT
if [ "${#extra[@]}" -eq 0 ]; then
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,openssh-server,cron \
        bookworm "$tmp" "$mirror" >&2
else
    base=$(bash "$0" --flavour minimal)  # built (or found) under its own lock
    cp -a "$base" "$tmp"
    rm -f "$tmp/.imagelint-rootfs-complete"
    printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"  # no service starts during the build
    chmod 755 "$tmp/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$tmp/etc/resolv.conf"
    mount -t proc proc "$tmp/proc"
    chroot "$tmp" apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get install -y -qq --no-install-recommends \
        "${extra[@]}" >&2
    umount "$tmp/proc"
    rm -f "$tmp/usr/sbin/policy-rc.d" "$tmp/etc/resolv.conf"
    rm -rf "$tmp"/var/lib/apt/lists/*
fi
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
