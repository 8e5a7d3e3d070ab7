"""One filesystem of a disk image as a resolver backend: ext2/3/4 and XFS, read by dissect.

A filesystem that was not cleanly unmounted is refused (``DiskImageError``, the run is inconclusive):
an ext4 journal that needs recovery, or an XFS log whose last record is not an unmount record, holds
writes the filesystem's own structures do not show yet, and replaying it would mean writing. Reading
such a filesystem as it lies could miss or invent files, so imagelint does not judge it; mount it
once (or run ``e2fsck``/``xfs_repair``) in the build and audit the result.
"""

from __future__ import annotations

import itertools
import stat
import struct
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, BinaryIO

from imagelint.targets.disk.errors import DiskImageError
from imagelint.targets.disk.extcsum import ExtChecksums
from imagelint.targets.disk.prefetch import DiskHints, Ranges, ext_data_ranges, ext_inode_tables
from imagelint.targets.disk.probe import EXT, XFS, read_at
from imagelint.targets.interface import FileKind, ImageStat, kind_of
from imagelint.targets.resolver import MAX_DIR_ENTRIES, entry_path  # one bound for every backend

Parts = tuple[str, ...]
MAX_CACHED_DIRS = 4096  # directory listings kept (least recently used first out)
MAX_CACHED_STATS = 200_000  # inode stat fields kept (cleared when full)
MAX_HINTED_DIRS = 4096  # directories hinted and not listed yet, remembered for listing ahead
MAX_LISTED_AHEAD = 256  # directories listed ahead of a walk and not asked for yet
AHEAD_CHECKS = 128  # hinted directories looked at per listing of the walk, in turn
_EXT_HEAD = struct.Struct("<HHI")  # i_mode, i_uid, i_size_lo
_EXT_IDS_HIGH = struct.Struct("<HH")  # i_uid_high, i_gid_high (at 120)
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")

_EXT_RECOVER = 0x4  # EXT3_FEATURE_INCOMPAT_RECOVER: the journal holds transactions to replay
_EXT_ERROR_FS = 0x2  # s_state: errors detected


class StreamFile:
    """A file inside the image (a dissect stream) read by positioned reads; there is no descriptor."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self._stream = stream
        self.size = size

    def pread(self, offset: int, length: int) -> bytes:
        try:
            self._stream.seek(offset)
            data: bytes = self._stream.read(length)
        except Exception as exc:  # a corrupt extent met mid-file: damage, as at open
            raise _wrap(exc) from None
        return data

    def fileno(self) -> None:
        return None

    def close(self) -> None:
        pass


def _wrap(exc: Exception) -> OSError:
    """Any failure of the filesystem library on a path, as an OSError for the resolver to report."""
    if isinstance(exc, OSError):
        return exc
    return OSError(0, f"the filesystem structure is unreadable ({type(exc).__name__}: {exc})")


class Filesystem:
    """A mounted-in-memory filesystem: lookups by resolved components, listings cached and bounded.

    ``hints`` (:mod:`.prefetch`), when the disk below can fetch ahead, is told which byte ranges of
    the filesystem are about to be read; hints never change what a lookup or listing returns.
    """

    def __init__(
        self, fstype: str, fs: Any, uuid: str, label: str, hints: DiskHints | None = None, *, size: int = 0
    ) -> None:
        self.fstype = fstype
        self.fs = fs
        self.uuid = uuid
        self.label = label
        self._bytes = size or (1 << 63)  # the filesystem's size: no directory is larger
        self._hints = hints if fstype == EXT else None
        self._checksums = ExtChecksums(read_at(fs.fh, 1024, 1024) if fstype == EXT else bytes(1024))
        self._dirs: OrderedDict[Parts, dict[str, Any]] = OrderedDict()
        self._ext_stats: dict[int, tuple[int, int, int, int]] = {}
        self._hinted: OrderedDict[Parts, Ranges] = OrderedDict()  # hinted, not listed yet
        self._ahead: set[Parts] = set()  # listed ahead of the walk, not asked for yet
        if self._hints is not None:
            try:
                ranges = ext_inode_tables(fs)
            except Exception:
                ranges = []  # an unexpected descriptor table: no hint, the reads find out
            self._hints.prefetch(ranges)

    def _stat_fields(self, node: Any) -> tuple[int, int, int, int]:
        """(mode, uid, gid, size) of an inode."""
        if self.fstype == EXT:
            return self._ext_stat(node)
        i = node.inode
        return int(i.di_mode), int(i.di_uid), int(i.di_gid), int(node.size)

    def _ext_stat(self, node: Any) -> tuple[int, int, int, int]:
        """The four stat fields of an ext inode, read from its first 128 bytes (the layout every ext
        revision shares) at the place dissect.extfs computes: parsing the whole inode structure
        with dissect's cstruct for each of a walk's entries cost most of a disk image audit."""
        cached = self._ext_stats.get(node.inum)
        if cached is not None:
            return cached
        raw = self._ext_inode(node.inum)
        mode, uid_lo, size_lo = _EXT_HEAD.unpack_from(raw, 0)
        (gid_lo,) = _U16.unpack_from(raw, 24)
        (size_hi,) = _U32.unpack_from(raw, 108)
        uid_hi, gid_hi = _EXT_IDS_HIGH.unpack_from(raw, 120)
        fields = (mode, (uid_hi << 16) | uid_lo, (gid_hi << 16) | gid_lo, (size_hi << 32) | size_lo)
        if len(self._ext_stats) >= MAX_CACHED_STATS:
            self._ext_stats.clear()
        self._ext_stats[node.inum] = fields
        return fields

    def _ext_inode(self, inum: int) -> bytes:
        """The raw ext inode ``inum``, checked against its checksum (:mod:`.extcsum`)."""
        ext = self.fs
        group, index = divmod(inum - 1, ext.sb.s_inodes_per_group)
        desc = ext._read_group_desc(group)
        table = desc.bg_inode_table_lo
        if getattr(desc, "bg_inode_table_hi", None) is not None and ext._group_desc_size >= 64:
            table |= desc.bg_inode_table_hi << 32
        size = max(128, int(ext.sb.s_inode_size))
        ext.fh.seek(table * ext.block_size + index * size)
        raw: bytes = ext.fh.read(size)
        if len(raw) < size:
            raise OSError(0, f"inode {inum} lies past the end of the filesystem (truncated)")
        self._checksums.check_inode(inum, raw)
        return raw

    def _check_ext_dir(self, node: Any) -> None:
        """Each data block of an ext directory checked against its checksum before it is listed."""
        if self._checksums.seed is None:
            return
        inode = self._ext_inode(node.inum)
        block_size = int(self.fs.block_size)
        number = 0
        for offset, length in ext_data_ranges(node):
            for at in range(offset, offset + length - block_size + 1, block_size):
                self.fs.fh.seek(at)
                block = self.fs.fh.read(block_size)
                if len(block) < block_size:
                    raise OSError(0, f"directory inode {node.inum}: block {number} is past the end")
                self._checksums.check_dir_block(node.inum, inode, block, number)
                number += 1

    # -- inode access ---------------------------------------------------------------------------

    def _children(self, parts: Parts, node: Any) -> dict[str, Any]:
        cached = self._dirs.get(parts)
        if cached is not None:
            self._dirs.move_to_end(parts)
            return cached
        size = int(node.size)
        if size > self._bytes:
            raise OSError(0, f"corrupt directory: it claims {size} bytes in a {self._bytes}-byte filesystem")
        if self.fstype == EXT:
            self._check_ext_dir(node)
        children: dict[str, Any] = {}
        for name, child in self._iter(node):
            if name not in (".", ".."):
                children[name] = child
                if len(children) > MAX_DIR_ENTRIES:
                    raise OSError(0, f"a directory of more than {MAX_DIR_ENTRIES} entries; not listed")
        self._dirs[parts] = children
        if len(self._dirs) > MAX_CACHED_DIRS:
            self._dirs.popitem(last=False)
        return children

    def _iter(self, node: Any) -> Any:
        return ((child.filename, child) for child in node.iterdir())

    def _node(self, parts: Parts) -> Any | None:
        # A walk asks for a child of the directory it listed last: its listing is cached, so the
        # node is one lookup, not a descent from the root (a directory cycle 2,048 levels deep made
        # that descent, and its prefixes, the whole cost of the walk).
        parent = self._dirs.get(parts[:-1]) if parts else None
        if parent is not None:
            return parent.get(parts[-1])
        node = self.fs.root
        for i, name in enumerate(parts):
            if self._stat_fields(node)[0] & 0o170000 != stat.S_IFDIR:
                return None
            node = self._children(parts[:i], node).get(name)
            if node is None:
                return None
        return node

    # -- read hints -------------------------------------------------------------------------------

    def prefetch_dirs(self, dirs: Sequence[Parts]) -> None:
        """Hint the data blocks of directories a walk is about to list (resolved paths in this
        filesystem), then list ahead those hinted earlier whose blocks have arrived.

        Only directories whose parent listing is cached are hinted, so hinting lists nothing; one
        whose blocks cannot be worked out is left for its listing to read. Listing ahead
        (:meth:`_list_ahead`) is what lets a depth-first walk fetch like a breadth-first one.
        """
        if self._hints is None:
            return
        self._hint_dirs(dirs)
        self._list_ahead()

    def _hint_dirs(self, dirs: Sequence[Parts]) -> None:
        assert self._hints is not None
        ranges: Ranges = []
        for parts in dirs:
            if parts in self._dirs or parts in self._hinted:
                continue  # listed already, or hinted and not listed yet
            node = self._listed_node(parts)
            if node is None:
                continue
            try:
                blocks = ext_data_ranges(node)
            except Exception:
                continue
            ranges += blocks
            if self._hints.can_tell:
                self._hinted[parts] = blocks
                if len(self._hinted) > MAX_HINTED_DIRS:
                    self._hinted.popitem(last=False)
        self._hints.prefetch(ranges)

    def _listed_node(self, parts: Parts) -> Any | None:
        """The node of ``parts`` from its parent's cached listing (the root for ``()``), or None."""
        if not parts:
            return self.fs.root
        parent = self._dirs.get(parts[:-1])
        return None if parent is None else parent.get(parts[-1])

    def _list_ahead(self) -> None:
        """List hinted directories whose blocks are all in (reading them waits for nothing) and hint
        their subdirectories, at most ``MAX_LISTED_AHEAD`` not yet asked for by the walk. Each call
        looks at ``AHEAD_CHECKS`` hinted directories, oldest first; one not in yet goes to the back.

        A walk lists one directory at a time and descends first: without this, the subdirectories
        of a directory are hinted only when the walk gets to it, so every directory with
        subdirectories costs one wait. Listed ahead, they are hinted as soon as their parent's
        blocks arrive. The listings are the ones the walk makes next (kept in the listing cache);
        a directory whose listing fails here is left for the walk to list and report.
        """
        assert self._hints is not None
        if len(self._ahead) >= MAX_LISTED_AHEAD:
            self._ahead &= self._dirs.keys()  # forget those whose listing has left the cache
        for _ in range(min(AHEAD_CHECKS, len(self._hinted))):
            if len(self._ahead) >= MAX_LISTED_AHEAD or not self._hinted:
                return
            parts, ranges = self._hinted.popitem(last=False)
            if parts in self._dirs:
                continue  # the walk has listed it
            if not self._hints.fetched(ranges):
                self._hinted[parts] = ranges  # not in yet: its turn comes again
                continue
            node = self._listed_node(parts)
            if node is None:
                continue
            try:
                children = self._children(parts, node)
                subdirs = [
                    (*parts, name) for name, child in children.items() if child.filetype == stat.S_IFDIR
                ]
            except Exception:
                continue
            self._ahead.add(parts)
            self._hint_dirs(subdirs)

    # -- the backend ------------------------------------------------------------------------------

    def lstat(self, parts: Parts) -> ImageStat | None:
        try:
            node = self._node(parts)
            if node is None:
                return None
            mode, uid, gid, size = self._stat_fields(node)
            return ImageStat.from_mode("/" + "/".join(parts), mode, uid, gid, size)
        except Exception as exc:
            raise _wrap(exc) from None

    def readlink(self, parts: Parts) -> str:
        try:
            node = self._node(parts)
            if node is None:
                raise FileNotFoundError(2, "No such file or directory")
            return str(node.link)
        except Exception as exc:
            raise _wrap(exc) from None

    def _dir(self, parts: Parts) -> dict[str, Any] | None:
        self._ahead.discard(parts)
        node = self._node(parts)
        if node is None or self._stat_fields(node)[0] & 0o170000 != stat.S_IFDIR:
            return None
        return self._children(parts, node)

    def scan(self, parts: Parts, limit: int, image_dir: str) -> list[tuple[str, ImageStat]] | None:
        try:
            children = self._dir(parts)
            if children is None:
                return None
            out = []
            for name, node in itertools.islice(children.items(), limit + 1):
                mode, uid, gid, size = self._stat_fields(node)
                out.append((name, ImageStat.from_mode(entry_path(image_dir, name), mode, uid, gid, size)))
            return out
        except Exception as exc:
            raise _wrap(exc) from None

    def kinds(self, parts: Parts, limit: int) -> dict[str, FileKind] | None:
        try:
            children = self._dir(parts)
            if children is None:
                return None
            listing: dict[str, FileKind] = {}
            for name, node in children.items():
                listing[name] = kind_of(_filetype(self.fstype, node))
                if len(listing) > limit:
                    break
            return listing
        except Exception as exc:
            raise _wrap(exc) from None

    def open(self, parts: Parts) -> StreamFile:
        try:
            node = self._node(parts)
            if node is None:
                raise FileNotFoundError(2, "No such file or directory")
            mode, _uid, _gid, size = self._stat_fields(node)
            if mode & 0o170000 != stat.S_IFREG:
                raise OSError(0, "not a regular file; not opened")
            return StreamFile(node.open(), size)
        except Exception as exc:
            raise _wrap(exc) from None


def _filetype(fstype: str, node: Any) -> int:
    """The file type, from the directory entry when it records one (no inode read then)."""
    return int(node.filetype)


def _power_of_two(value: int, low: int, high: int) -> bool:
    return low <= value <= high and not value & (value - 1)


def _check_ext_superblock(stream: BinaryIO, where: str) -> None:
    """The superblock fields dissect.extfs shifts, divides and sizes by, checked before it does
    (``1024 << s_log_block_size`` of 2^32-1 is a 512 MiB integer)."""
    sb = read_at(stream, 1024, 1024).ljust(1024, b"\0")
    blocks_per_group, _, inodes_per_group = struct.unpack_from("<III", sb, 32)
    log_block, log_cluster = struct.unpack_from("<II", sb, 24)
    (rev,) = _U32.unpack_from(sb, 76)
    (inode_size,) = _U16.unpack_from(sb, 88)
    (desc_size,) = _U16.unpack_from(sb, 254)
    bad = None
    if log_block > 6 or log_cluster > 6:
        bad = f"s_log_block_size {log_block} / s_log_cluster_size {log_cluster} (blocks of 1 to 64 KiB)"
    elif not 0 < blocks_per_group <= 8 << (10 + log_block) or not 0 < inodes_per_group <= 8 << (
        10 + log_block
    ):
        bad = f"s_blocks_per_group {blocks_per_group} / s_inodes_per_group {inodes_per_group}"
    elif rev and not _power_of_two(inode_size, 128, 1024 << log_block):
        bad = f"s_inode_size {inode_size}"
    elif desc_size and not _power_of_two(desc_size, 32, 1024):
        bad = f"s_desc_size {desc_size}"
    if bad:
        raise DiskImageError(f"the ext4 superblock is corrupt: {bad}", where=where)


def _check_xfs_superblock(stream: BinaryIO, where: str) -> None:
    """The XFS superblock's sizes and logs (dissect.xfs shifts and multiplies by them), checked first."""
    sb = read_at(stream, 0, 512).ljust(512, b"\0")
    (block_size,) = struct.unpack_from(">I", sb, 4)
    (ag_blocks, ag_count) = struct.unpack_from(">II", sb, 84)
    inode_size, per_block = struct.unpack_from(">HH", sb, 104)
    block_log, _sector_log, inode_log, per_block_log, ag_log = struct.unpack_from(">BBBBB", sb, 120)
    bad = None
    if not _power_of_two(block_size, 512, 65536) or block_size != 1 << block_log:
        bad = f"sb_blocksize {block_size} (sb_blocklog {block_log})"
    elif not _power_of_two(inode_size, 256, 2048) or inode_size != 1 << inode_log:
        bad = f"sb_inodesize {inode_size} (sb_inodelog {inode_log})"
    elif per_block != block_size // inode_size or per_block != 1 << per_block_log:
        bad = f"sb_inopblock {per_block} (sb_inopblog {per_block_log})"
    elif not 0 < ag_blocks <= 1 << ag_log or ag_log > 31 or ag_count == 0:
        bad = f"sb_agblocks {ag_blocks} (sb_agblklog {ag_log}), sb_agcount {ag_count}"
    if bad:
        raise DiskImageError(f"the XFS superblock is corrupt: {bad}", where=where)


def _check_size(fstype: str, needed: int, size: int, where: str) -> None:
    if needed > size:
        raise DiskImageError(
            f"truncated: the {fstype} filesystem spans {needed} bytes but its volume has {size}", where=where
        )


def open_filesystem(
    fstype: str, stream: BinaryIO, size: int, where: str, hints: DiskHints | None = None
) -> Filesystem:
    """Open a filesystem found on a volume of ``size`` bytes, refusing one that does not fit in it
    (truncated) or was not cleanly unmounted (see the module doc). ``hints`` takes read hints in
    the volume's bytes (:mod:`.prefetch`); ext4's inode tables are hinted once opened."""
    try:
        if fstype == EXT:
            from imagelint.targets.disk.extmap import bounded_extfs

            _check_ext_superblock(stream, where)
            ext = bounded_extfs()(stream)
            _check_size(fstype, ext.block_count * ext.block_size, size, where)
            if ext.sb.s_feature_incompat & _EXT_RECOVER:
                raise DiskImageError(
                    "the ext4 journal needs recovery (the filesystem was not cleanly unmounted); "
                    "not read as it lies: unmount it cleanly or run e2fsck in the build, then audit",
                    where=where,
                )
            if ext.sb.s_state & _EXT_ERROR_FS:
                raise DiskImageError(
                    "the ext4 filesystem is marked as having errors; run e2fsck", where=where
                )
            return Filesystem(
                EXT, ext, str(ext.uuid), ext.volume_name, hints, size=ext.block_count * ext.block_size
            )
        if fstype == XFS:
            from dissect.xfs import XFS as XFSReader

            _check_xfs_superblock(stream, where)
            xfs = XFSReader(stream)
            _check_size(fstype, xfs.sb.sb_dblocks * xfs.block_size, size, where)
            if not _xfs_log_clean(xfs, stream, size, where):
                raise DiskImageError(
                    "the XFS log is dirty (the filesystem was not cleanly unmounted); not read as it "
                    "lies: unmount it cleanly or run xfs_repair in the build, then audit",
                    where=where,
                )
            return Filesystem(XFS, xfs, str(xfs.uuid), xfs.name, size=xfs.sb.sb_dblocks * xfs.block_size)
    except DiskImageError:
        raise
    except ImportError:
        from imagelint.targets.disk.errors import EXTRA_HINT

        raise DiskImageError(f"{fstype} support is not installed: {EXTRA_HINT}", where=where) from None
    except Exception as exc:
        raise DiskImageError(
            f"the {fstype} filesystem is corrupt or truncated ({type(exc).__name__}: {exc})", where=where
        ) from None
    raise DiskImageError(f"unsupported filesystem {fstype}", where=where)


_XLOG_MAGIC = 0xFEEDBABE
_XLOG_UNMOUNT_TRANS = 0x20
_XLOG_HEADER = struct.Struct(">IIIIQQII")  # magic, cycle, version, len, lsn, tail_lsn, crc, prev_block
MAX_LOG_BYTES = 2 * 1024 * 1024 * 1024


def _xfs_log_clean(xfs: Any, stream: BinaryIO, size: int, where: str) -> bool:
    """Whether the internal log's head record is an unmount record (what ``xlog_find_tail`` checks).

    The head is the record with the highest log sequence number; a clean unmount writes one record
    of one operation flagged ``XLOG_UNMOUNT_TRANS`` last. An external log cannot be checked: dirty then.
    """
    sb = xfs.sb
    if not sb.sb_logstart:
        return False  # an external log device is not in this image
    agno, agbno = sb.sb_logstart >> sb.sb_agblklog, sb.sb_logstart & ((1 << sb.sb_agblklog) - 1)
    start = (agno * sb.sb_agblocks + agbno) * sb.sb_blocksize
    length = min(sb.sb_logblocks * sb.sb_blocksize, MAX_LOG_BYTES)
    if start + length > size:
        raise DiskImageError(
            f"the XFS log ({sb.sb_logblocks} blocks at block {sb.sb_logstart}) is past the end of its volume",
            where=where,
        )
    best: tuple[int, int] | None = None  # (lsn, offset of the record header)
    chunk = 1 << 20
    for base in range(0, length, chunk):
        data = read_at(stream, start + base, min(chunk, length - base))
        for off in range(0, len(data) - _XLOG_HEADER.size + 1, 512):
            if data[off : off + 4] != b"\xfe\xed\xba\xbe":
                continue
            _m, _cycle, _v, _len, lsn, _tail, _crc, _prev = _XLOG_HEADER.unpack_from(data, off)
            if best is None or lsn > best[0]:
                best = (lsn, base + off)
    if best is None:
        return True  # a log never written to (made by mkfs, never mounted) has nothing to replay
    header = read_at(stream, start + best[1], 512)
    n_ops = struct.unpack_from(">I", header, 40)[0]
    first_op = read_at(stream, start + best[1] + 512, 12)
    return n_ops == 1 and len(first_op) == 12 and bool(first_op[9] & _XLOG_UNMOUNT_TRANS)
