"""Container headers (qcow2, vmdk, vhdx, vhd) checked before dissect.hypervisor is handed the file.

Two things are refused here, each as one :class:`DiskImageError` line naming the file and the field:

* **other files.** dissect opens what a header names: a VMDK's ``parentFileNameHint`` (absolute
  paths too) and a descriptor's extent files, a VHDX's parent locator, a qcow2's backing and data
  files (beside the image when it is given a path). imagelint opens only the file the user named, so
  an image that needs another file (a differencing or child image, a split VMDK) is not read;
  a differencing VHD, whose parent dissect would silently read as zeros, neither.
* **counts that lie.** A table dissect reads whole when it opens the image (qcow2's L1 table, a
  sparse VMDK's grain directory, VHDX's region and metadata tables, VHD's block allocation table) must
  lie inside the file and stay under a fixed cap, so that a few KiB of header cannot make it allocate
  gigabytes; the sizes that divide offsets (cluster, grain, block, sector) must be sane.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO
from uuid import UUID

from imagelint.targets.disk.errors import DiskImageError, shown
from imagelint.targets.disk.probe import QCOW2, VHD, VHDX, VMDK, read_at, stream_size

MAX_TABLE_ENTRIES = 1 << 20  # of a table read whole at open (8 MiB of qcow2 L1: a 512 TiB disk)
MAX_DESCRIPTOR_BYTES = 1 << 20
_ONLY_NAMED = "imagelint opens only the file named: merge it into one image first (qemu-img convert)"

_QCOW2 = struct.Struct(">4sIQIIQIIQQIIQ")  # ... snapshots_offset (72 bytes, version 2)
_QCOW2_INCOMPAT = struct.Struct(">Q")  # at 72 (version 3)
_QCOW2_CORRUPT, _QCOW2_DATA_FILE, _QCOW2_EXTENDED_L2 = 1 << 1, 1 << 2, 1 << 4
_QCOW2_KNOWN = 0x1F  # dirty, corrupt, external data file, compression type, extended L2
_QCOW2_EXT_DATA_FILE = 0x44415441

_VMDK = struct.Struct("<4sIIQQQQIQQQ")
_VMDK_GD_AT_END = 0xFFFFFFFFFFFFFFFF

_VHDX_REGION = struct.Struct("<4sII4x")
_VHDX_REGION_ENTRY = struct.Struct("<16sQII")
_VHDX_METADATA = struct.Struct("<8s2xH20x")
_VHDX_METADATA_ENTRY = struct.Struct("<16sIII4x")
_VHDX_METADATA_REGION = UUID("8B7CA206-4790-4B9A-B8FE-575F050F886E")
_VHDX_BAT_REGION = UUID("2DC27766-F623-4200-9D64-115E9BFD4A08")
_VHDX_FILE_PARAMETERS = UUID("CAA16737-FA36-4D43-B3B6-33F0AA44E76B")
_VHDX_PARENT_LOCATOR = UUID("A8D35F2D-B30B-454D-ABF7-D3D84834AB0C")
_VHDX_LOGICAL_SECTOR = UUID("8141BF1D-A96F-4709-BA47-F233A8FAAB5F")
_VHDX_MAX_ENTRIES = 2047  # the specification's limit for both tables
_VHDX_KEY_VALUE = struct.Struct("<IIHH")

_VHD_FOOTER = struct.Struct(">8sIIQIIIIQQII")  # ... disk_type at 60
_VHD_DYNAMIC = struct.Struct(">8sQQIII")
_VHD_FIXED, _VHD_DYNAMIC_DISK, _VHD_DIFFERENCING = 2, 3, 4


class Guarded:
    """A container's virtual disk as dissect reads it, whose reads fail only with DiskImageError.

    dissect.hypervisor reads tables lazily, as the disk is read: a corrupt entry then raises
    whatever the parser meets (EOFError, ValueError, zlib.error...). Through this stream it is one
    line naming the container and the offset, wherever the read came from."""

    def __init__(self, disk: Any, fmt: str, where: str) -> None:
        self._disk = disk
        self._fmt = fmt
        self._where = where
        self.size = int(disk.size)

    def _failed(self, what: str, exc: Exception) -> DiskImageError:
        return DiskImageError(
            f"{self._fmt}: corrupt container: {what} failed ({type(exc).__name__}: {exc})", where=self._where
        )

    def read(self, length: int = -1) -> bytes:
        at = self._disk.tell()
        try:
            data: bytes = self._disk.read(length)
        except DiskImageError:
            raise
        except Exception as exc:
            raise self._failed(f"reading {length} bytes at byte {at}", exc) from None
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return int(self._disk.seek(offset, whence))
        except Exception as exc:
            raise self._failed(f"seeking to {offset}", exc) from None

    def tell(self) -> int:
        return int(self._disk.tell())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True


_EMBEDDED_LBA = 0x20000  # a compressed grain's marker holds its LBA (streamOptimized)


def bound_grains(vmdk: Any, where: str) -> Any:
    """Make each compressed sparse extent of a dissect VMDK inflate a grain to at most its grain size.

    dissect reads a grain's marker and inflates all it says (``zlib.decompress``): a few KiB of a
    crafted grain become gigabytes. The marker's size is checked against the grain and the inflating
    stops at the grain's size, as qemu does."""
    for disk in getattr(vmdk, "disks", []):
        if hasattr(disk, "_read_compressed_grain"):
            disk._read_compressed_grain = _GrainReader(disk, where)
    return vmdk


class _GrainReader:
    def __init__(self, disk: Any, where: str) -> None:
        self._disk = disk
        self._where = where
        self._grain = int(disk.header.grain_size) * 512
        self._marker = 12 if disk.header.flags & _EMBEDDED_LBA else 4

    def __call__(self, sector: int) -> bytes:
        import zlib

        fh = self._disk.fh
        fh.seek(sector * 512)
        head = fh.read(self._marker)
        if len(head) < self._marker:
            raise _corrupt(
                VMDK, f"the compressed grain at sector {sector} is past the end of the file", self._where
            )
        (length,) = struct.unpack_from("<I", head, self._marker - 4)
        if length > 2 * self._grain + 4096:  # deflate never grows a grain that much
            raise DiskImageError(
                f"{VMDK}: corrupt compressed grain: {length} bytes at sector {sector} for a "
                f"{self._grain}-byte grain",
                where=self._where,
            )
        data = zlib.decompressobj().decompress(fh.read(length), self._grain)
        return bytes(data)


def _corrupt(fmt: str, what: str, where: str) -> DiskImageError:
    return DiskImageError(f"{fmt}: corrupt header: {what}", where=where)


def _has_parent(fmt: str, name: str, where: str) -> DiskImageError:
    return DiskImageError(f"{fmt}: has a parent/backing file ({name}); {_ONLY_NAMED}", where=where)


def _table_fits(
    fmt: str, field: str, offset: int, entries: int, entry_size: int, size: int, where: str
) -> None:
    """A table of ``entries`` read whole at ``offset``: under the cap and inside the file."""
    if entries > MAX_TABLE_ENTRIES or offset + entries * entry_size > size:
        raise _corrupt(
            fmt,
            f"{field} {entries} ({entries * entry_size} bytes at offset {offset}) does not fit in the "
            f"{size}-byte file",
            where,
        )


def check_container(fmt: str, fh: BinaryIO, where: str) -> None:
    """Raise DiskImageError when the container needs another file or its header counts lie."""
    size = stream_size(fh)
    {QCOW2: _check_qcow2, VMDK: _check_vmdk, VHDX: _check_vhdx, VHD: _check_vhd}[fmt](fh, size, where)


def _check_qcow2(fh: BinaryIO, size: int, where: str) -> None:
    head = read_at(fh, 0, 104)
    if len(head) < _QCOW2.size:
        raise _corrupt(QCOW2, "truncated header", where)
    (_m, version, backing_offset, backing_size, cluster_bits, _vsize, _crypt, l1_size, l1_offset,
     _rc_offset, _rc_clusters, _nb_snap, _snap_offset) = _QCOW2.unpack_from(head)  # fmt: skip
    if backing_offset:
        name = read_at(fh, backing_offset, min(backing_size, 1023))
        raise _has_parent(QCOW2, f'backing file "{shown(name)}"', where)
    if version >= 3 and len(head) >= 80:
        (incompatible,) = _QCOW2_INCOMPAT.unpack_from(head, 72)
        if incompatible & ~_QCOW2_KNOWN:
            raise _corrupt(QCOW2, f"unknown incompatible features {incompatible:#x}", where)
        if incompatible & _QCOW2_CORRUPT:
            raise DiskImageError(f"{QCOW2}: marked corrupt by qemu (run qemu-img check -r all)", where=where)
        if incompatible & _QCOW2_EXTENDED_L2:  # dissect's subcluster runs can span gigabytes of zeros
            raise DiskImageError(
                f"{QCOW2}: extended L2 entries are not supported: convert it (qemu-img convert -O qcow2)",
                where=where,
            )
        if incompatible & _QCOW2_DATA_FILE:
            raise DiskImageError(
                f"{QCOW2}: keeps its data in an external data file; {_ONLY_NAMED}", where=where
            )
    if not 9 <= cluster_bits <= 21:
        raise _corrupt(QCOW2, f"cluster_bits {cluster_bits} (9 to 21)", where)
    _table_fits(QCOW2, "l1_size", l1_offset, l1_size, 8, size, where)


def _check_vmdk(fh: BinaryIO, size: int, where: str) -> None:
    head = read_at(fh, 0, 512)
    if head.startswith(b"# Disk DescriptorFile"):
        extent = next((line for line in head.decode("latin-1").splitlines() if '"' in line), "")
        name = extent.split('"')[1] if extent.count('"') >= 2 else "its extents"
        raise DiskImageError(
            f'{VMDK}: a descriptor whose data is in other files ("{shown(name)}"); {_ONLY_NAMED}', where=where
        )
    header = _vmdk_header(head, where)
    if header[9] == _VMDK_GD_AT_END:  # streamOptimized: the header that counts is the footer's
        header = _vmdk_header(read_at(fh, max(size - 1024, 0), 512), where)
    _m, _v, _flags, capacity, grain, desc_offset, desc_size, gte, _rgd, gd, _overhead = header
    if not 1 <= grain <= 4096 or grain & (grain - 1):
        raise _corrupt(VMDK, f"grain_size {grain} sectors (a power of two up to 4096)", where)
    if not 1 <= gte <= 512 * 1024:
        raise _corrupt(VMDK, f"num_grain_table_entries {gte} (1 to 524288)", where)
    if desc_size:
        if desc_size * 512 > MAX_DESCRIPTOR_BYTES or (desc_offset + desc_size) * 512 > size:
            raise _corrupt(VMDK, f"descriptor_size {desc_size} sectors at sector {desc_offset}", where)
        descriptor = read_at(fh, desc_offset * 512, desc_size * 512).split(b"\0", 1)[0]
        _vmdk_parent(descriptor, where)
    directory = -(-capacity // (gte * grain))
    _table_fits(VMDK, "grain directory size", gd * 512, directory, 4, size, where)
    _table_fits(
        VMDK, "grain directory size", _VMDK.size, directory, 4, size, where
    )  # dissect reads it here too


def _vmdk_header(raw: bytes, where: str) -> tuple[int, ...]:
    if len(raw) < _VMDK.size or raw[:4] != b"KDMV":
        raise _corrupt(VMDK, "no sparse extent header (KDMV)", where)
    return _VMDK.unpack_from(raw)


def _vmdk_parent(descriptor: bytes, where: str) -> None:
    settings = {}
    for line in descriptor.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            settings[key.strip()] = value.strip().strip('"')
    if settings.get("parentCID", "ffffffff").lower() != "ffffffff":
        hint = settings.get("parentFileNameHint", "")
        raise _has_parent(VMDK, f'parentFileNameHint "{shown(hint)}"', where)


def _check_vhdx(fh: BinaryIO, size: int, where: str) -> None:
    region = read_at(fh, 3 * 65536, 65536)
    if len(region) < _VHDX_REGION.size:
        raise _corrupt(VHDX, "truncated region table", where)
    signature, _crc, count = _VHDX_REGION.unpack_from(region)
    if signature != b"regi" or count > _VHDX_MAX_ENTRIES or _VHDX_REGION.size + count * 32 > len(region):
        raise _corrupt(VHDX, f"region table (signature {shown(signature)}, entry_count {count})", where)
    regions = {}
    for i in range(count):
        guid, offset, length, _req = _VHDX_REGION_ENTRY.unpack_from(region, _VHDX_REGION.size + i * 32)
        regions[UUID(bytes_le=guid)] = (offset, length)
    if _VHDX_METADATA_REGION not in regions or _VHDX_BAT_REGION not in regions:
        raise _corrupt(VHDX, "the region table has no metadata or BAT region", where)
    meta_offset, meta_length = regions[_VHDX_METADATA_REGION]
    if meta_offset + meta_length > size or meta_length > 64 * 1024 * 1024:
        raise _corrupt(VHDX, f"metadata region of {meta_length} bytes at {meta_offset}", where)
    table = read_at(fh, meta_offset, 65536)
    if len(table) < _VHDX_METADATA.size:
        raise _corrupt(VHDX, "truncated metadata table", where)
    signature, count = _VHDX_METADATA.unpack_from(table)
    if signature != b"metadata" or count > _VHDX_MAX_ENTRIES or _VHDX_METADATA.size + count * 32 > len(table):
        raise _corrupt(VHDX, f"metadata table (signature {shown(signature)}, entry_count {count})", where)
    items = {}
    for i in range(count):
        item, offset, length, _flags = _VHDX_METADATA_ENTRY.unpack_from(table, _VHDX_METADATA.size + i * 32)
        if offset + length > meta_length:
            raise _corrupt(VHDX, f"metadata item at {offset} of {length} bytes is outside its region", where)
        items[UUID(bytes_le=item)] = meta_offset + offset
    if _VHDX_FILE_PARAMETERS not in items or _VHDX_LOGICAL_SECTOR not in items:
        raise _corrupt(VHDX, "no file parameters or logical sector size", where)
    block_size, flags = struct.unpack("<II", read_at(fh, items[_VHDX_FILE_PARAMETERS], 8).ljust(8, b"\0"))
    (sector,) = struct.unpack("<I", read_at(fh, items[_VHDX_LOGICAL_SECTOR], 4).ljust(4, b"\0"))
    if flags & 2:
        raise _has_parent(VHDX, f"parent locator {_vhdx_locator(fh, items.get(_VHDX_PARENT_LOCATOR))}", where)
    if sector not in (512, 4096):
        raise _corrupt(VHDX, f"logical sector size {sector} (512 or 4096)", where)
    if not 1 << 20 <= block_size <= 256 << 20 or block_size & (block_size - 1):
        raise _corrupt(VHDX, f"block size {block_size} (a power of two, 1 to 256 MiB)", where)


def _vhdx_locator(fh: BinaryIO, offset: int | None) -> str:
    """The parent's path as its locator gives it (for the message only; never opened)."""
    if offset is None:
        return "(none given)"
    raw = read_at(fh, offset, 65536)
    if len(raw) < 20:
        return "(unreadable)"
    (count,) = struct.unpack_from("<H", raw, 18)
    found: dict[str, str] = {}
    for i in range(min(count, (len(raw) - 20) // 12)):
        key_at, value_at, key_len, value_len = _VHDX_KEY_VALUE.unpack_from(raw, 20 + i * 12)
        key = raw[key_at : key_at + key_len].decode("utf-16-le", "replace")
        found[key] = raw[value_at : value_at + value_len].decode("utf-16-le", "replace")
    for key in ("relative_path", "absolute_win32_path", "volume_path"):
        if key in found:
            return f'{key} "{shown(found[key])}"'
    return "(no path)"


def _check_vhd(fh: BinaryIO, size: int, where: str) -> None:
    footer = read_at(fh, size - 512, 512)
    if footer[:8] != b"conectix":
        footer = read_at(fh, 0, 512)  # a dynamic VHD's copy of its footer
    (_c, _features, _version, data_offset, _ts, _app, _cv, _os, _orig, current, _geom,
     disk_type) = _VHD_FOOTER.unpack_from(footer.ljust(512, b"\0"))  # fmt: skip
    if disk_type == _VHD_FIXED:
        if current > size - 512:
            raise DiskImageError(
                f"{VHD}: truncated: the fixed disk holds {current} bytes but the file has {size - 512}",
                where=where,
            )
        return
    dynamic = read_at(fh, data_offset, 1024) if data_offset < size else b""
    if len(dynamic) < 1024 or dynamic[:8] != b"cxsparse":
        raise _corrupt(VHD, f"no dynamic disk header at data_offset {data_offset}", where)
    _cookie, _d, table_offset, _hv, entries, block_size = _VHD_DYNAMIC.unpack_from(dynamic)
    if disk_type == _VHD_DIFFERENCING:
        name = dynamic[64:576].decode("utf-16-be", "replace").split("\0", 1)[0]
        raise _has_parent(VHD, f'differencing disk of "{shown(name)}"', where)
    if disk_type != _VHD_DYNAMIC_DISK:
        raise _corrupt(VHD, f"disk type {disk_type} (2 fixed, 3 dynamic, 4 differencing)", where)
    if not 512 <= block_size <= 256 << 20 or block_size & (block_size - 1):
        raise _corrupt(VHD, f"block_size {block_size} (a power of two, 512 B to 256 MiB)", where)
    _table_fits(VHD, "max_table_entries", table_offset, entries, 4, size, where)
