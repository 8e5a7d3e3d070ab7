"""What a stream holds, by content: a container format, a filesystem, LVM, LUKS, or a partition table."""

from __future__ import annotations

from typing import BinaryIO

# container formats (the first bytes of the file, or the footer for a fixed VHD)
QCOW2, VMDK, VHD, VHDX, RAW = "qcow2", "vmdk", "vhd", "vhdx", "raw"


MAX_OFFSET = 1 << 62  # past any disk; an offset from a header beyond it reads nothing


def read_at(stream: BinaryIO, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` (fewer at the end; none at an offset no disk reaches)."""
    if not 0 <= offset < MAX_OFFSET:
        return b""
    try:
        stream.seek(offset)
    except OSError:
        return b""  # past what the file's filesystem can hold (EINVAL): past the file
    return stream.read(length)


def stream_size(stream: BinaryIO) -> int:
    size = getattr(stream, "size", None)
    if isinstance(size, int):
        return size
    end = stream.seek(0, 2)
    return int(end)


def container_format(stream: BinaryIO) -> str:
    head = read_at(stream, 0, 512)
    if head[:4] == b"QFI\xfb":
        return QCOW2
    if head[:4] == b"KDMV" or head.startswith(b"# Disk DescriptorFile"):
        return VMDK
    if head[:8] == b"vhdxfile":
        return VHDX
    if head[:8] == b"conectix":  # a dynamic VHD starts with a copy of its footer
        return VHD
    size = stream_size(stream)
    if size >= 512 and read_at(stream, size - 512, 8) == b"conectix":
        return VHD
    return RAW


# what a volume (a whole disk, a partition, a logical volume) holds
EXT, XFS, BTRFS, LUKS, LVM, VFAT, SWAP, SQUASHFS = (
    "ext4",
    "xfs",
    "btrfs",
    "LUKS",
    "LVM2",
    "vfat",
    "swap",
    "squashfs",
)
READABLE = (EXT, XFS)


def volume_content(stream: BinaryIO) -> str | None:
    """The filesystem or container on a volume, by its superblock magic; None when unrecognised."""
    head = read_at(stream, 0, 4096)
    if head[:6] == b"LUKS\xba\xbe":
        return LUKS
    if head[:4] == b"XFSB":
        return XFS
    if head[:4] == b"hsqs":
        return SQUASHFS
    if len(head) >= 1082 and head[1080:1082] == b"\x53\xef":
        return EXT
    for sector in range(4):
        if head[sector * 512 : sector * 512 + 8] == b"LABELONE" and head[
            sector * 512 + 24 : sector * 512 + 32
        ] == (b"LVM2 001"):
            return LVM
    if head[4086:4096] in (b"SWAPSPACE2", b"SWAP-SPACE"):
        return SWAP
    if read_at(stream, 0x10040, 8) == b"_BHRfS_M":
        return BTRFS
    if head[510:512] == b"\x55\xaa" and (head[0x36:0x39] == b"FAT" or head[0x52:0x57] == b"FAT32"):
        return VFAT
    return None
