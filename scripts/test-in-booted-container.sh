#!/usr/bin/env bash
# The suite on a "developer laptop": a machine whose PID 1 is systemd, with sshd listening on port 22.
# The test image with sshd (scripts/build-test-rootfs.sh --flavour ssh) is copied, given python3,
# git and strace, and booted with systemd-nspawn (systemd PID 1, its sshd on :22 of a network of its
# own); both phases of `make test` (not serial, then serial) run inside it as root, in a service of
# its systemd (systemd-run), without IMAGELINT_NO_SKIP: what the container cannot do (boot a
# container of its own, debootstrap) skips with its reason, named and counted on the last line of
# each phase (tests/conftest.py). Nothing may fail.
#
#   scripts/test-in-booted-container.sh [PYTEST ARGS...]    e.g. tests/soak tests/checks
#
# Needs root and systemd-nspawn on the host. This checkout's HEAD is cloned into WORK/src (commit
# first), bound at /src/imagelint, its venv built inside the container. The host's test caches
# (~/.cache/imagelint-tests: the Debian trees, disk and VM images, the Mermaid CLI) are an overlay
# at the container's ~/.cache/imagelint-tests: read, never written (writes go to a temporary upper
# layer). The container's pip reads the index through the host's network while it is set up;
# IMAGELINT_WHEELHOUSE=DIR installs from a directory of wheels instead (bound read-only).
# IMAGELINT_LAPTOP_DIR (default /var/tmp/imagelint-laptop) keeps the copy between runs.
# TEST_WORKERS (default 1) and `nice -n 19`: a shared machine stays usable.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "test-in-booted-container: needs root (systemd-nspawn)" >&2; exit 2; }
workers="${TEST_WORKERS:-1}"
work="${IMAGELINT_LAPTOP_DIR:-/var/tmp/imagelint-laptop}"
cache="${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}"
mkdir -p "$work"
root="$work/rootfs"
src="$work/src"
machine="imagelint-laptop-$$"

if [ ! -f "$root/.laptop-ready" ]; then
    image=$(bash scripts/build-test-rootfs.sh --flavour ssh | tail -n 1)
    rm -rf "$root.tmp" && cp -a --reflink=auto "$image" "$root.tmp"
    # what scripts/install.sh --test installs, but for the large ones (chromium, npm, QEMU's machine,
    # packer) and the container tools (debootstrap, systemd-nspawn): their tests skip, saying so
    systemd-nspawn -q -D "$root.tmp" --register=no --keep-unit --resolv-conf=copy-host bash -c \
        'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq \
         --no-install-recommends python3 python3-venv git make strace curl ca-certificates procps iproute2 \
         systemd-journal-remote rpm qemu-utils xfsprogs lvm2 e2fsprogs fdisk dosfstools cryptsetup-bin \
         sudo genisoimage prometheus prometheus-node-exporter >/dev/null'
    touch "$root.tmp/.laptop-ready"
    rm -rf "$root" && mv "$root.tmp" "$root"
fi

[ -d "$src/.git" ] || git clone -q --no-checkout "$PWD" "$src"
git -C "$src" fetch -q "$PWD" HEAD && git -C "$src" checkout -q --detach FETCH_HEAD
pip=(/src/imagelint/.venv/bin/python -m pip install -q)
binds=(--bind="$src:/src/imagelint")
if [ -n "${IMAGELINT_WHEELHOUSE:-}" ]; then
    pip+=(--no-index --find-links /wheels)
    binds+=(--bind-ro="$IMAGELINT_WHEELHOUSE:/wheels")
fi
if [ ! -x "$src/.venv/bin/python" ] || [ -n "${IMAGELINT_WHEELHOUSE:-}" ]; then
    systemd-nspawn -q -D "$root" --register=no --keep-unit --resolv-conf=copy-host "${binds[@]}" bash -c \
        "cd /src/imagelint && { [ -x .venv/bin/python ] || python3 -m venv .venv; } \
         && ${pip[*]} --upgrade pip && ${pip[*]} -e '.[disk,watch]' --group test"
fi

# Boot: systemd as PID 1, a network namespace of its own (its sshd binds :22 there, not on this host)
mkdir -p "$cache" "$root/root/.cache/imagelint-tests"
# /tmp on disk: nspawn's own /tmp is a tmpfs of 10% of the RAM, and the suite keeps every test's
# tmp_path (copies of the Debian trees among them) until the session ends
rm -rf "$work/tmp" && mkdir -m 1777 "$work/tmp"
binds+=(--bind="$work/tmp:/tmp")
systemd-nspawn -q -D "$root" --register=no --keep-unit --private-network --boot -M "$machine" \
    "${binds[@]}" --overlay="$cache::/root/.cache/imagelint-tests" >"$work/console.log" 2>&1 &
nspawn=$!
stop() { kill -TERM "$nspawn" 2>/dev/null; wait "$nspawn" 2>/dev/null || true; }
trap stop EXIT
init=""
for _ in $(seq 300); do
    kill -0 "$nspawn" 2>/dev/null || break
    init=$(cut -d' ' -f1 "/proc/$nspawn/task/$nspawn/children" 2>/dev/null || true)
    if [ -n "$init" ]; then
        inside=(nsenter -t "$init" -m -u -i -n -p --)
        state=$("${inside[@]}" systemctl is-system-running 2>/dev/null || true)
        if [[ "$state" = running || "$state" = degraded ]] && "${inside[@]}" ss -Hltn 'sport = :22' | grep -q .; then
            break
        fi
    fi
    sleep 1
done
[ -n "$init" ] && "${inside[@]}" ss -Hltn 'sport = :22' | grep -q . \
    || { echo "test-in-booted-container: the container did not come up with sshd on :22" >&2; tail "$work/console.log" >&2; exit 1; }
echo "test-in-booted-container: PID 1 is $("${inside[@]}" cat /proc/1/comm), system $state, sshd on :22" >&2

# each phase as a service of the container's systemd, as a developer's shell would start it; the
# tests that build a wheel (pip, hatchling) read the wheelhouse: the booted container has no network
env=(-E HOME=/root -E LANG=C.UTF-8 -E PATH=/src/imagelint/.venv/bin:/usr/sbin:/usr/bin:/sbin:/bin)
[ -n "${IMAGELINT_WHEELHOUSE:-}" ] && env+=(-E PIP_NO_INDEX=1 -E PIP_FIND_LINKS=/wheels)
run() {
    "${inside[@]}" systemd-run --quiet --wait --pipe --collect -p Nice=19 -p WorkingDirectory=/src/imagelint \
        "${env[@]}" /src/imagelint/.venv/bin/python -m pytest "$@"
}
set +e
run -n "$workers" --dist loadfile -m "not serial" "$@"; parallel=$?
run -m serial "$@"; serial=$?
[ "$parallel" -eq 0 ] && [ "$serial" -eq 0 ]
