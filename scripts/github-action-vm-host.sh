#!/usr/bin/env bash
# The VM host step of the imagelint GitHub Action (action.yml), run only in soak mode (the soak input
# set): makes the runner able to boot the disk image for `imagelint vm check`.
#
# 1. Tools: qemu-system-x86_64 (qemu-system-x86), qemu-img (qemu-utils), genisoimage, ssh and
#    ssh-keygen (openssh-client) and the OVMF firmware (ovmf, for --firmware uefi). Whatever is missing
#    is installed with apt-get, as root directly or through `sudo -n` (GitHub-hosted runners have
#    both); without apt-get or sudo the step names the packages and fails (exit 2).
# 2. KVM: when /dev/kvm exists but this user cannot open it (GitHub's runners: root:kvm 0660), the
#    udev rule GitHub documents for its larger and standard Linux runners is installed through sudo:
#        KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"
#    in /etc/udev/rules.d/99-kvm4all.rules, then `udevadm control --reload-rules` and `udevadm trigger
#    --name-match=kvm`. When /dev/kvm is absent or stays closed (no sudo, a container, no nested
#    virtualisation), the boot falls back to TCG: `vm check --accel auto` probes KVM itself and the
#    report says which accelerator ran. That fallback is a notice, not a failure.
#
# Environment (none of it an input of the Action):
#   IMAGELINT_UDEV_RULES  where the rule is written (default /etc/udev/rules.d/99-kvm4all.rules)
#   IMAGELINT_KVM_DEVICE  the device probed (default /dev/kvm)
# The step output `kvm` is "true" when the device opens for this user afterwards, else "false".
set -uo pipefail

rules="${IMAGELINT_UDEV_RULES:-/etc/udev/rules.d/99-kvm4all.rules}"
device="${IMAGELINT_KVM_DEVICE:-/dev/kvm}"
rule='KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"'

as_root=()
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        as_root=(false)  # nothing can run as root here
    fi
fi

missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v qemu-img >/dev/null || missing+=(qemu-utils)
command -v genisoimage >/dev/null || missing+=(genisoimage)
{ command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; } || missing+=(openssh-client)
[ -e /usr/share/ovmf/OVMF.fd ] || missing+=(ovmf)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "${as_root[*]}" = false ] || ! command -v apt-get >/dev/null; then
        echo "imagelint: error: soak mode needs ${missing[*]} (Debian/Ubuntu packages), and neither apt-get nor root (sudo -n) is at hand to install them" >&2
        exit 2
    fi
    echo "imagelint: installing ${missing[*]}"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || exit 2
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -- "${missing[@]}" || exit 2
else
    echo "imagelint: qemu-system-x86_64, qemu-img, genisoimage, ssh and OVMF are installed"
fi

usable() { [ -c "$device" ] && [ -r "$device" ] && [ -w "$device" ]; }
if [ -c "$device" ] && ! usable && [ "${as_root[*]}" != false ]; then
    echo "imagelint: $device is not open to $(id -un): installing the udev rule $rules"
    printf '%s\n' "$rule" | "${as_root[@]}" tee -- "$rules" >/dev/null
    "${as_root[@]}" udevadm control --reload-rules
    "${as_root[@]}" udevadm trigger --name-match=kvm
    "${as_root[@]}" udevadm settle --timeout=10 2>/dev/null || true
fi
kvm=false
if usable; then
    kvm=true
    echo "imagelint: $device is open to $(id -un): vm check uses KVM when the guest's kernel starts under it"
elif [ -c "$device" ]; then
    echo "::notice title=imagelint vm::$device is not open to this user (no sudo, or udev did not apply the rule): the image boots under TCG (emulation), minutes instead of seconds"
else
    echo "::notice title=imagelint vm::no $device on this runner: the image boots under TCG (emulation), minutes instead of seconds"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'kvm=%s\n' "$kvm" >>"$GITHUB_OUTPUT"
fi
exit 0
