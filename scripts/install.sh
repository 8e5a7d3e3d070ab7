#!/usr/bin/env bash
# Install imagelint into ./.venv, with the system packages it needs on Debian.
#
#   scripts/install.sh          runtime only (enough for `make demo`)
#   scripts/install.sh --test   also what the test suite needs: debootstrap, systemd-nspawn, strace,
#                               systemd-journal-remote, packer, rpm (rpmbuild + an sqlite
#                               rpmdb for the package inventory), the disk-image tools (gdisk too),
#                               QEMU (qemu-system-x86, genisoimage, ovmf: vm check),
#                               prometheus (+ promtool), prometheus-node-exporter, chromium
#                               and npm with the Mermaid CLI (the report pictures' renderers,
#                               cached under ~/.cache/imagelint-tests), and the Python test tools
# Needs root (or sudo) only when a Debian package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

packages=()
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv python3-pip)
if [ "$want_test" = 1 ]; then
    command -v debootstrap >/dev/null || packages+=(debootstrap)
    command -v systemd-nspawn >/dev/null || packages+=(systemd-container)
    [ -x /lib/systemd/systemd-journal-remote ] || packages+=(systemd-journal-remote)
    command -v packer >/dev/null || packages+=(packer)
    command -v git >/dev/null || packages+=(git)
    command -v strace >/dev/null || packages+=(strace)  # tests that prove what a run opens
    command -v sudo >/dev/null || packages+=(sudo)  # the Action as a runner user with sudo (tests/github)
    command -v rpmbuild >/dev/null || packages+=(rpm)
    # disk-image tests: qemu-img, mkfs.xfs, LVM, sfdisk, mkfs.vfat (EFI partition), cryptsetup (LUKS)
    command -v qemu-img >/dev/null || packages+=(qemu-utils)
    command -v mkfs.xfs >/dev/null || packages+=(xfsprogs)
    command -v pvcreate >/dev/null || packages+=(lvm2)
    command -v mke2fs >/dev/null || packages+=(e2fsprogs)
    command -v sfdisk >/dev/null || packages+=(fdisk)
    command -v sgdisk >/dev/null || packages+=(gdisk)  # GPT type codes (ESP, BIOS boot): --firmware auto
    command -v mkfs.vfat >/dev/null || packages+=(dosfstools)
    command -v cryptsetup >/dev/null || packages+=(cryptsetup-bin)
    # vm check: the machine, its NoCloud seed (and isoinfo to read one back), UEFI firmware
    command -v qemu-system-x86_64 >/dev/null || packages+=(qemu-system-x86)
    command -v genisoimage >/dev/null || packages+=(genisoimage)
    [ -e /usr/share/ovmf/OVMF.fd ] || packages+=(ovmf)
    command -v promtool >/dev/null || packages+=(prometheus)  # server + promtool: imagelint watch tests
    command -v prometheus-node-exporter >/dev/null || packages+=(prometheus-node-exporter)
    [ -x /usr/bin/chromium ] || packages+=(chromium)  # draws the Mermaid charts, opens the html report
    command -v npm >/dev/null || packages+=(npm)  # installs the Mermaid CLI (tests/formats/browsers.py)
    # the severities' emoji in the docs pictures (make docs: scripts/docs-screenshots.py)
    [ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || packages+=(fonts-noto-color-emoji)
fi
if [ "${#packages[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "install: apt-get install ${packages[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "install: imagelint needs Python 3.11 or newer (found $(python3 --version))" >&2
    exit 1
}
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$want_test" = 1 ]; then
    .venv/bin/python -m pip install -q -e '.[disk,watch]' --group test
    .venv/bin/python -m tests.formats.browsers  # the pinned Mermaid CLI, installed once per machine
else
    .venv/bin/python -m pip install -q -e .
fi
