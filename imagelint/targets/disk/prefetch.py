"""Read hints for a raw disk stream that can fetch ahead: byte ranges the filesystem reader will read soon.

A disk stream may offer ``prefetch(ranges)`` (:class:`Prefetching`; the EBS snapshot stream does):
it starts fetching the blocks of those byte ranges at once and returns without waiting. A stream
without it (a local image file, a qcow2 container) gets no hints and nothing here is computed for it.
The filesystem parsers read one structure at a time, so over a remote disk every read would wait
for its own round trip; a hint lets those waits overlap. Hints never change what a read returns,
and what working them out reads (the group descriptors, a hinted directory's inode and extent
blocks) the reader reads anyway; one that cannot be worked out (an unexpected structure) is simply
not given.

What is hinted (ext2/3/4 only; XFS gets none):

- when the filesystem is opened, the *used* part of every block group's inode table
  (:func:`ext_inode_tables`): every ``lstat`` of a walk reads one inode from there;
- in a tree walk, the data blocks of a directory's subdirectories before the walk descends into
  them (:func:`ext_data_ranges`), so one level's directory blocks are fetched in parallel; when
  the stream can also say whether ranges are in already (``fetched``, :class:`Fetched`), the
  filesystem lists hinted directories ahead of the walk as their blocks arrive, and hints the next
  level from there.

Ranges are byte offsets in the filesystem; :class:`DiskHints` turns them into offsets on the raw
disk (a partition's start added). Volumes that are not one plain slice of the disk (LVM logical
volumes) get no hints.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, Protocol, cast

Ranges = list[tuple[int, int]]

# ext4 on-disk constants (the kernel's fs/ext4/ext4.h)
_INCOMPAT_META_BG = 0x10  # group descriptors spread over the disk: not hinted
_INCOMPAT_64BIT = 0x80
_RO_COMPAT_GDT_CSUM = 0x10  # uninit_bg: bg_itable_unused is kept
_RO_COMPAT_METADATA_CSUM = 0x400  # metadata_csum: bg_itable_unused is kept
_BG_INODE_UNINIT = 0x1  # the group's inode table holds no used inode
_INLINE_DATA_FL = 0x10000000  # the inode's data lives in the inode itself
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
MAX_HINTED_GROUPS = 1 << 17  # a 16 TiB filesystem of 4 KiB blocks has 131072 groups


class Prefetching(Protocol):
    """A disk stream that can fetch ahead (optional: a stream without ``prefetch`` gets no hints)."""

    def prefetch(self, ranges: Iterable[tuple[int, int]]) -> int:
        """Start fetching the data of byte ranges ``(offset, length)`` without waiting; returns how
        many units (blocks) it requested."""
        ...


class Fetched(Protocol):
    """Optional too, beside ``prefetch``: whether reading byte ranges now would not wait."""

    def fetched(self, ranges: Iterable[tuple[int, int]]) -> bool: ...


class DiskHints:
    """The hints of one volume, passed to its disk's ``prefetch`` (and ``fetched``) at its offset."""

    def __init__(self, disk: object, offset: int = 0) -> None:
        self._disk = disk
        self.offset = offset
        self.can_tell = callable(getattr(disk, "fetched", None))  # whether :meth:`fetched` knows

    def within(self, offset: int | None) -> DiskHints | None:
        """The hints of a volume starting ``offset`` bytes into this one (None: not one plain slice)."""
        return None if offset is None else DiskHints(self._disk, self.offset + offset)

    def _moved(self, ranges: Ranges) -> Ranges:
        return [(start + self.offset, length) for start, length in ranges] if self.offset else ranges

    def prefetch(self, ranges: Ranges) -> None:
        if ranges:
            cast(Prefetching, self._disk).prefetch(self._moved(ranges))

    def fetched(self, ranges: Ranges) -> bool:
        """Whether the disk already holds these ranges (False when it cannot tell)."""
        return self.can_tell and cast(Fetched, self._disk).fetched(self._moved(ranges))


def disk_hints(stream: object) -> DiskHints | None:
    """Hints for a raw disk stream that has ``prefetch``; None for any other (nothing is computed)."""
    if not callable(getattr(stream, "prefetch", None)):
        return None
    return DiskHints(stream)


def ext_inode_tables(ext: Any) -> Ranges:
    """Byte ranges (in the filesystem) of the used part of each block group's inode table.

    Read from the group descriptor table with the kernel's ``struct ext4_group_desc`` layout:
    ``bg_inode_table`` (the table's first block), ``bg_flags`` (``INODE_UNINIT``: no inode used) and
    ``bg_itable_unused`` (inodes never used, at the end of the table), so the used part is the first
    ``inodes_per_group - bg_itable_unused`` inodes. Only dissect.extfs's public attributes are used
    (``sb``, ``fh``, ``block_size``, ``groups_count``, ``groups_offset``): the descriptors are parsed
    here, not through dissect's private ``_read_group_desc``. Nothing is hinted when the counts are
    not kept (no ``uninit_bg``/``metadata_csum``: the whole tables could be mostly unused) or the
    descriptors are not in one table (``meta_bg``).
    """
    sb = ext.sb
    if not sb.s_feature_ro_compat & (_RO_COMPAT_GDT_CSUM | _RO_COMPAT_METADATA_CSUM):
        return []
    if sb.s_feature_incompat & _INCOMPAT_META_BG:
        return []
    wide = bool(sb.s_feature_incompat & _INCOMPAT_64BIT) and sb.s_desc_size >= 64
    desc_size = int(sb.s_desc_size) if wide else 32
    groups = min(int(ext.groups_count), MAX_HINTED_GROUPS)
    per_group, inode_size, block_size = int(sb.s_inodes_per_group), int(sb.s_inode_size), int(ext.block_size)
    fs_bytes = int(ext.block_count) * block_size
    ext.fh.seek(int(ext.groups_offset))
    table = ext.fh.read(groups * desc_size)
    ranges: Ranges = []
    for group in range(min(groups, len(table) // desc_size)):
        at = group * desc_size
        (start,) = _U32.unpack_from(table, at + 8)
        (flags,) = _U16.unpack_from(table, at + 18)
        (unused,) = _U16.unpack_from(table, at + 28)
        if wide:
            start |= _U32.unpack_from(table, at + 40)[0] << 32
            unused |= _U16.unpack_from(table, at + 50)[0] << 16
        used = 0 if flags & _BG_INODE_UNINIT else max(0, per_group - unused)
        offset = start * block_size
        if used and 0 < offset < fs_bytes:
            ranges.append((offset, min(used * inode_size, fs_bytes - offset)))
    return ranges


def ext_data_ranges(node: Any) -> Ranges:
    """Byte ranges (in the filesystem) of an ext inode's data blocks, from dissect's public
    ``INode.dataruns()`` (holes left out; none for data kept inline in the inode).

    For an extent tree deeper than the inode (a directory of more than four extents) ``dataruns()``
    reads the tree's index blocks itself: those reads are the ones listing the directory would make.
    """
    inode = node.inode
    if inode.i_flags & _INLINE_DATA_FL:
        return []
    block_size = int(node.extfs.block_size)
    left = int(node.size)
    ranges: Ranges = []
    for block, count in node.dataruns():
        if left <= 0:
            break
        length = min(int(count) * block_size, left)
        if block is not None:
            ranges.append((int(block) * block_size, length))
        left -= length
    return ranges
