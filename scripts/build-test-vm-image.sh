#!/usr/bin/env bash
# Build (once) a bootable Debian 12 disk image for imagelint's VM tests: its own kernel, GRUB on an MBR
# disk, cloud-init (NoCloud), openssh-server, cgroup v2 (bookworm's default).
#
# Usage: scripts/build-test-vm-image.sh [--variant clean|crashloop|nocloud] [DEST]
#   clean      the image as it should ship (the default): no SSH host keys (cloud-init makes them at
#              first boot), no machine id of D-Bus's own, no password logins, no apt caches
#   nocloud    the clean image without cloud-init: reached only through the systemd credential
#              ssh.authorized_keys.root (SMBIOS type 11, systemd 252+'s tmpfiles provision.conf); a
#              oneshot unit (imagelint-hostkeys.service) runs `ssh-keygen -A` before ssh.service, as
#              cloud-init would have made the host keys
#   crashloop  the same plus leaky.service, enabled: it writes a small file under /var/tmp (page cache
#              charged to its memory cgroup), exits 1 and is restarted every second for ever
#              (StartLimitIntervalSec=0), so each restart leaves a dying memory cgroup behind
# DEST defaults to ${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}/vm-VARIANT.qcow2.
# The cache key is this script's SHA-256 and the variant, kept in DEST.recipe beside the image: an
# image built by another version of the recipe (or with no key) is built again.
#
# The recipe (../shared/DESIGN.md, "QEMU here"): the minimal test tree (scripts/build-test-rootfs.sh),
# the kernel, initramfs-tools, cloud-init and GRUB's i386-pc modules installed with apt inside it
# (fstab and initramfs-tools' FSTYPE written first, so the initrd carries ext4 and fsck); an ext4 file
# system made from the tree with `mkfs.ext4 -d` (no loop device) and copied to offset 1 MiB of an
# sfdisk-partitioned raw disk; GRUB's boot.img in the MBR and a core.img made by the image's own
# grub-mkimage (biosdisk, part_msdos, ext2, search_fs_uuid, an embedded search for the root's UUID)
# in the sectors after it; the network by systemd-networkd (DHCP on every en*/eth* link), cloud-init
# only for the NoCloud seed's users and keys. The image is built in a temporary sibling and renamed
# into place under a lock, like the test trees. Prints the path of the image on stdout.
set -euo pipefail

variant=clean
if [ "${1:-}" = "--variant" ]; then
    variant="${2:?--variant needs clean, crashloop or nocloud}"
    shift 2
fi
case "$variant" in clean | crashloop | nocloud) ;; *) echo "build-test-vm-image: unknown variant $variant" >&2; exit 2 ;; esac
cache="${IMAGELINT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagelint-tests}"
dest="${1:-$cache/vm-$variant.qcow2}"

recipe="$(sha256sum < "$0" | cut -d' ' -f1) $variant"
fresh() { [ -f "$dest" ] && [ "$(cat "$dest.recipe" 2>/dev/null)" = "$recipe" ]; }
if fresh; then
    echo "$dest"
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "build-test-vm-image: installing the kernel in the tree needs root" >&2; exit 1; }
for tool in sfdisk mkfs.ext4 qemu-img; do
    command -v "$tool" >/dev/null || { echo "build-test-vm-image: $tool is not installed" >&2; exit 1; }
done

mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
if fresh; then  # another run built it while we waited
    echo "$dest"
    exit 0
fi
work="$dest.partial.$$"
tree="$work/tree"
cleanup() {
    for m in dev/pts dev sys proc; do
        mountpoint -q "$tree/$m" 2>/dev/null && umount -l "$tree/$m"
    done
    rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"

base=$(bash "$(dirname "$0")/build-test-rootfs.sh" --flavour minimal)
cp -a "$base" "$tree"
rm -f "$tree/.imagelint-rootfs-complete"
uuid=$(cat /proc/sys/kernel/random/uuid)

printf 'UUID=%s / ext4 defaults,errors=remount-ro 0 1\n' "$uuid" > "$tree/etc/fstab"
mkdir -p "$tree/etc/initramfs-tools/conf.d"
echo 'FSTYPE=ext4' > "$tree/etc/initramfs-tools/conf.d/fstype"
printf '#!/bin/sh\nexit 101\n' > "$tree/usr/sbin/policy-rc.d"  # no service starts during the build
chmod 755 "$tree/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$tree/etc/resolv.conf"
mount -t proc proc "$tree/proc"
mount -t sysfs sysfs "$tree/sys"
mount --bind /dev "$tree/dev"
mount --bind /dev/pts "$tree/dev/pts"
chroot "$tree" apt-get update -qq >&2
cloud_init=cloud-init
[ "$variant" = nocloud ] && cloud_init=
DEBIAN_FRONTEND=noninteractive chroot "$tree" apt-get install -y -qq --no-install-recommends \
    linux-image-cloud-amd64 initramfs-tools $cloud_init grub-pc-bin sudo e2fsprogs >&2
for m in dev/pts dev sys proc; do umount "$tree/$m"; done
rm -f "$tree/usr/sbin/policy-rc.d" "$tree/etc/resolv.conf"
rm -rf "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/archives/*.deb

if [ "$variant" = nocloud ]; then
    # never installed above; the purge takes whatever the base tree might carry of it
    DEBIAN_FRONTEND=noninteractive chroot "$tree" dpkg --purge cloud-init >/dev/null 2>&1 || true
    rm -rf "$tree/etc/cloud"
    # the host keys cloud-init would have made at first boot
    cat > "$tree/etc/systemd/system/imagelint-hostkeys.service" <<'EOF'
[Unit]
Description=Make the SSH host keys the image ships without
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
RequiredBy=ssh.service
EOF
    mkdir -p "$tree/etc/systemd/system/ssh.service.requires"
    ln -sf /etc/systemd/system/imagelint-hostkeys.service \
        "$tree/etc/systemd/system/ssh.service.requires/imagelint-hostkeys.service"
    ln -sf /etc/systemd/system/imagelint-hostkeys.service \
        "$tree/etc/systemd/system/multi-user.target.wants/imagelint-hostkeys.service"
    # enabled on purpose, as the image's presets say (imagelint's IL203 asks that of an enabled unit)
    mkdir -p "$tree/etc/systemd/system-preset"
    echo 'enable imagelint-hostkeys.service' > "$tree/etc/systemd/system-preset/50-imagelint-test.preset"
else
    # cloud-init: the NoCloud seed only (users, keys); the network is systemd-networkd's
    cat > "$tree/etc/cloud/cloud.cfg.d/90-imagelint-test.cfg" <<'EOF'
datasource_list: [NoCloud, None]
network: {config: disabled}
locale: C.UTF-8
EOF
fi
mkdir -p "$tree/etc/systemd/network"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n' > "$tree/etc/systemd/network/20-wired.network"
ln -sf /lib/systemd/system/systemd-networkd.service \
    "$tree/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
echo imagelint-vm > "$tree/etc/hostname"
: > "$tree/etc/machine-id"  # a fresh id at each boot, as a cloud image has

if [ "$variant" = crashloop ]; then
    cat > "$tree/etc/systemd/system/leaky.service" <<'EOF'
[Unit]
Description=A unit that fails and is restarted for ever, each run leaving page cache in its cgroup
StartLimitIntervalSec=0

[Service]
ExecStart=/bin/sh -c 'head -c 65536 /dev/urandom > /var/tmp/leaky.$$$$; cat /var/tmp/leaky.$$$$ > /dev/null; exit 1'
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
EOF
    ln -sf /etc/systemd/system/leaky.service "$tree/etc/systemd/system/multi-user.target.wants/leaky.service"
fi

# what a shipped image must not carry (imagelint's own image rules: IL101, IL103, IL111, IL113)
rm -f "$tree"/etc/ssh/ssh_host_*_key "$tree"/etc/ssh/ssh_host_*_key.pub  # made at first boot
if [ -e "$tree/var/lib/dbus/machine-id" ]; then
    ln -sf /etc/machine-id "$tree/var/lib/dbus/machine-id"
fi
mkdir -p "$tree/etc/ssh/sshd_config.d"
echo 'PasswordAuthentication no' > "$tree/etc/ssh/sshd_config.d/50-imagelint-test.conf"
rm -f "$tree"/var/cache/apt/*.bin

kernel=$(cd "$tree/boot" && ls vmlinuz-* | sort -V | tail -n 1)
version=${kernel#vmlinuz-}
mkdir -p "$tree/boot/grub/i386-pc"
cp "$tree"/usr/lib/grub/i386-pc/*.mod "$tree"/usr/lib/grub/i386-pc/*.lst "$tree/boot/grub/i386-pc/"
cat > "$tree/boot/grub/grub.cfg" <<EOF
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
set timeout=0
menuentry "Debian" {
    linux /boot/vmlinuz-$version root=UUID=$uuid ro console=ttyS0,115200 panic=10
    initrd /boot/initrd.img-$version
}
EOF
printf 'search.fs_uuid %s root\nset prefix=($root)/boot/grub\n' "$uuid" > "$tree/tmp/embed.cfg"
chroot "$tree" grub-mkimage -O i386-pc -o /tmp/core.img -c /tmp/embed.cfg -p /boot/grub \
    biosdisk part_msdos ext2 search_fs_uuid
mv "$tree/tmp/core.img" "$work/core.img"
rm -f "$tree/tmp/embed.cfg"
cp "$tree/usr/lib/grub/i386-pc/boot.img" "$work/boot.img"

size_mib=3072
truncate -s "${size_mib}M" "$work/root.ext4"
truncate -s 0 "$work/root.ext4"
truncate -s "$((size_mib - 1))M" "$work/root.ext4"
mkfs.ext4 -q -F -U "$uuid" -L root -d "$tree" "$work/root.ext4"
truncate -s "${size_mib}M" "$work/disk.raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$work/disk.raw"
dd if="$work/root.ext4" of="$work/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$work/boot.img" of="$work/disk.raw" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$work/disk.raw" bs=512 seek=1 conv=notrunc status=none
qemu-img convert -O qcow2 "$work/disk.raw" "$work/image.qcow2"
rm -f "$dest.recipe"  # the key names the image beside it: never a new key on an old image
mv "$work/image.qcow2" "$dest"
echo "$recipe" > "$work/recipe" && mv "$work/recipe" "$dest.recipe"
echo "$dest"
