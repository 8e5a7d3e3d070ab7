"""ext4 metadata checksums (``metadata_csum``), verified before an inode or a directory block is used.

dissect.extfs reads inodes and directory blocks as they lie: a flipped bit in an inode's mode or
size, or in a name of a directory block, would read as a different file (a finding that vanishes or
turns milder), never as damage. A filesystem made with ``metadata_csum`` (mke2fs's default since
e2fsprogs 1.43) records a CRC32C of each, which the kernel checks on every read; imagelint checks
the same ones, and a mismatch is damage (an ``OSError`` the resolver reports as such). A filesystem
without the feature has nothing to check against: what it holds is read as it lies.

The arithmetic is the kernel's (``ext4_inode_csum``, ``ext4_dirblock_csum``): CRC32C without the
final inversion, seeded with the CRC of the filesystem UUID (or ``s_checksum_seed``), then the inode
number and generation.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import cast

_RO_COMPAT_METADATA_CSUM = 0x400
_INCOMPAT_CSUM_SEED = 0x2000
_GOOD_OLD_INODE_SIZE = 128
_CSUM_LO = 0x7C  # i_checksum_lo (2 bytes)
_EXTRA_ISIZE = 0x80  # i_extra_isize (2 bytes)
_CSUM_HI = 0x82  # i_checksum_hi (2 bytes), present when i_extra_isize reaches it
_GENERATION = 0x64
_FLAGS = 0x20
_INDEX_FL = 0x1000  # a hashed (htree) directory: its index blocks carry no leaf tail
_TAIL = struct.Struct("<IHBBI")  # inode 0, rec_len 12, name_len 0, file type 0xDE, checksum
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_MASK = 0xFFFFFFFF


def _crc32c() -> Callable[[bytes, int], int]:
    """dissect.util's CRC32C: its native build when installed (~3 µs an inode), else its pure-Python
    one (~50 µs an inode: a disk audit of a real image 1.5 times as long)."""
    try:  # its submodules are attributes of the extension, not importable by name
        from dissect.util._native import hash as native

        return cast("Callable[[bytes, int], int]", native.crc32c.crc32c)
    except (ImportError, AttributeError):
        from dissect.util.hash.crc32c import crc32c

        return cast("Callable[[bytes, int], int]", crc32c)


_CRC32C: Callable[[bytes, int], int] | None = None


def _crc(seed: int, data: bytes) -> int:
    """The kernel's ``crc32c(seed, data)``: the register without the initial and final inversion."""
    global _CRC32C
    if _CRC32C is None:
        _CRC32C = _crc32c()
    return _CRC32C(data, seed ^ _MASK) ^ _MASK


class ExtChecksums:
    """The checksum seed of one ext filesystem and the checks that use it (None: no metadata_csum)."""

    def __init__(self, superblock: bytes) -> None:
        (incompat,) = _U32.unpack_from(superblock, 0x60)
        (ro_compat,) = _U32.unpack_from(superblock, 0x64)
        self.seed: int | None = None
        if ro_compat & _RO_COMPAT_METADATA_CSUM:
            if incompat & _INCOMPAT_CSUM_SEED:
                (self.seed,) = _U32.unpack_from(superblock, 0x270)
            else:
                self.seed = _crc(_MASK, superblock[0x68:0x78])

    def _inode_seed(self, inum: int, raw: bytes) -> int:
        assert self.seed is not None
        return _crc(_crc(self.seed, _U32.pack(inum)), raw[_GENERATION : _GENERATION + 4])

    def check_inode(self, inum: int, raw: bytes) -> None:
        """Raise OSError when inode ``inum`` (all ``s_inode_size`` bytes of it) fails its checksum."""
        if self.seed is None:
            return
        data = bytearray(raw)
        stored = _U16.unpack_from(data, _CSUM_LO)[0]
        data[_CSUM_LO : _CSUM_LO + 2] = b"\0\0"
        bits = 16
        if len(data) > _GOOD_OLD_INODE_SIZE:
            (extra,) = _U16.unpack_from(data, _EXTRA_ISIZE)
            if _GOOD_OLD_INODE_SIZE + extra >= _CSUM_HI + 2:
                stored |= _U16.unpack_from(data, _CSUM_HI)[0] << 16
                data[_CSUM_HI : _CSUM_HI + 2] = b"\0\0"
                bits = 32
        computed = _crc(self._inode_seed(inum, raw), bytes(data)) & ((1 << bits) - 1)
        if computed != stored:
            raise OSError(0, f"inode {inum} fails its checksum (stored {stored:#x}, computed {computed:#x})")

    def check_dir_block(self, inum: int, inode: bytes, block: bytes, number: int) -> None:
        """Raise OSError when block ``number`` of directory ``inum`` fails its checksum. A block
        without the leaf tail is an index block of a hashed directory (left unchecked), or damage."""
        if self.seed is None:
            return
        size = len(block)
        zero, rec_len, name_len, file_type, stored = _TAIL.unpack_from(block, size - _TAIL.size)
        if (zero, rec_len, name_len, file_type) != (0, _TAIL.size, 0, 0xDE):
            if _U32.unpack_from(inode, _FLAGS)[0] & _INDEX_FL:
                return
            raise OSError(0, f"directory inode {inum}: block {number} has no checksum tail")
        computed = _crc(self._inode_seed(inum, inode), block[: size - _TAIL.size])
        if computed != stored:
            why = f"fails its checksum (stored {stored:#x}, computed {computed:#x})"
            raise OSError(0, f"directory inode {inum}: block {number} {why}")
