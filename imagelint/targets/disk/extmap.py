"""The block map of an ext2/3/4 file, built within a budget, for dissect.extfs's inodes.

dissect.extfs builds a file's run list from its extent tree or indirect blocks before the first read,
following what the inode and tree blocks claim: ``eh_entries`` beyond ``eh_max``, any depth, the same
tree block named again and again (four index entries to a block of 340 naming a block of 340...: a
30-byte file with 157 million extents), or an indirect map enumerated block by block up to the
claimed size (a 1 TiB inode is a list of 268 million block numbers). :func:`ext_runs` builds the same
run list, checked as the kernel checks an extent tree (magic, ``eh_entries <= eh_max <=`` the node's
room, depth at most 5 and one less at each level, extents in order and inside the filesystem), stops
at the file's last block, counts a hole as one run however large, and reads at most
``MAX_MAP_BLOCKS`` tree or indirect blocks and ``MAX_RUNS`` runs per file. Anything else is an
``OSError`` naming the inode and the field: the resolver reports that path unreadable.
"""

from __future__ import annotations

import functools
import itertools
import struct
from typing import Any

MAX_EXTENT_DEPTH = 5  # the kernel's EXT4_MAX_EXTENT_DEPTH
MAX_MAP_BLOCKS = 2048  # tree or indirect blocks read to map one file (2048 x 1024 blocks: 8 GiB)
MAX_RUNS = 1 << 16  # runs in one file's map
_EXTENTS_FL = 0x80000
_EXTENT_MAGIC = 0xF30A
_NODE_HEADER = struct.Struct("<HHHH4x")  # eh_magic, eh_entries, eh_max, eh_depth
_EXTENT = struct.Struct("<IHHI")  # ee_block, ee_len, ee_start_hi, ee_start_lo
_INDEX = struct.Struct("<IIH2x")  # ei_block, ei_leaf_lo, ei_leaf_hi
_UNINIT = 0x8000

Runs = list[tuple[int | None, int]]


def _leaf(first: int, length: int, start_hi: int, start_lo: int) -> tuple[int, int, int, bool]:
    """(logical block, blocks, physical block, uninitialised) of an extent (a length over 32768 marks
    an uninitialised one, as the kernel reads it)."""
    uninitialised = length > _UNINIT
    return first, length - _UNINIT if uninitialised else length, (start_hi << 32) | start_lo, uninitialised


class _Map:
    """One file's run list under construction."""

    def __init__(self, inode: Any) -> None:
        ext = inode.extfs
        self.inum = inode.inum
        self.fh = ext.fh
        self.block_size = ext.block_size
        self.block_count = ext.block_count
        self.blocks = -(-inode.size // ext.block_size)  # the file's blocks, from its size
        self.runs: Runs = []
        self.position = 0  # logical blocks mapped so far
        self.reads = 0

    def corrupt(self, what: str) -> OSError:
        return OSError(0, f"inode {self.inum}: corrupt block map: {what}")

    def add(self, start: int | None, count: int) -> None:
        if count <= 0:
            return
        if self.runs:
            last, length = self.runs[-1]
            if (last is None and start is None) or (
                last is not None and start is not None and last + length == start
            ):
                self.runs[-1] = (last, length + count)
                self.position += count
                return
        if len(self.runs) >= MAX_RUNS:
            raise self.corrupt(f"more than {MAX_RUNS} runs")
        self.runs.append((start, count))
        self.position += count

    def read_block(self, block: int) -> bytes:
        self.reads += 1
        if self.reads > MAX_MAP_BLOCKS:
            raise self.corrupt(f"more than {MAX_MAP_BLOCKS} map blocks")
        if block >= self.block_count:
            raise self.corrupt(f"map block {block} is past the filesystem's {self.block_count} blocks")
        self.fh.seek(block * self.block_size)
        raw: bytes = self.fh.read(self.block_size)
        if len(raw) < self.block_size:
            raise self.corrupt(f"map block {block} is past the end of the volume (truncated)")
        return raw

    def done(self) -> bool:
        return bool(self.position >= self.blocks)

    # -- extents ----------------------------------------------------------------------------------

    def extent_node(self, raw: bytes, depth: int | None) -> None:
        magic, entries, room, node_depth = _NODE_HEADER.unpack_from(raw)
        fits = (len(raw) - _NODE_HEADER.size) // _EXTENT.size
        if magic != _EXTENT_MAGIC:
            raise self.corrupt(f"extent header magic {magic:#x}")
        if entries > room or room > fits:
            raise self.corrupt(f"eh_entries {entries} beyond eh_max {room} or the node's room for {fits}")
        if node_depth > MAX_EXTENT_DEPTH or (depth is not None and node_depth != depth):
            raise self.corrupt(f"eh_depth {node_depth} (expected {depth if depth is not None else '<= 5'})")
        at = [_NODE_HEADER.size + i * _EXTENT.size for i in range(entries)]
        if node_depth == 0:
            extents = [_leaf(*_EXTENT.unpack_from(raw, offset)) for offset in at]
            self.check_leaf(extents)
            for first, length, start, uninitialised in extents:
                if self.done() or first >= self.blocks:
                    return  # preallocated past the file's size: never read
                self.add(None, first - self.position)
                self.add(None if uninitialised else start, length)
            return
        index = [_INDEX.unpack_from(raw, offset) for offset in at]
        if any(later[0] <= earlier[0] for earlier, later in itertools.pairwise(index)):
            raise self.corrupt("index entries out of order (a subtree named twice)")
        for first, leaf_lo, leaf_hi in index:
            if self.done() or first >= self.blocks:
                return
            self.extent_node(self.read_block((leaf_hi << 32) | leaf_lo), node_depth - 1)

    def check_leaf(self, extents: list[tuple[int, int, int, bool]]) -> None:
        """The kernel's checks of a leaf (in order, not empty, inside the filesystem), and no written
        extent past the file's last block (only an uninitialised one, preallocated, may lie there)."""
        end = self.position
        for first, length, start, uninitialised in extents:
            if length == 0 or first < end:
                raise self.corrupt(
                    f"extent at logical block {first} of {length} blocks: out of order or empty"
                )
            if start + length > self.block_count:
                raise self.corrupt(f"extent at block {start} of {length} blocks is past the filesystem")
            if first >= self.blocks and not uninitialised:
                raise self.corrupt(f"extent at logical block {first} is past the file's {self.blocks} blocks")
            end = first + length

    # -- indirect blocks (ext2/3) -----------------------------------------------------------------

    def indirect(self, pointer: int, level: int, count: int) -> None:
        """``count`` blocks mapped by a ``level``-indirect block (a hole when the pointer is 0)."""
        if pointer == 0:
            self.add(None, count)
            return
        raw = self.read_block(pointer)
        per = self.block_size // 4
        pointers = struct.unpack(f"<{per}I", raw)
        if level == 1:
            for p in pointers[:count]:
                self.add(p or None, 1)
            return
        below = per ** (level - 1)
        for p in pointers:
            if count <= 0:
                return
            n = min(count, below)
            self.indirect(p, level - 1, n)
            count -= n


def ext_runs(inode: Any) -> Runs:
    """(block or None for a hole, count) runs covering the file's blocks, as dissect.extfs's
    ``INode.dataruns()`` returns them; OSError when the map is corrupt or over budget."""
    m = _Map(inode)
    i_block: bytes = bytes(inode.inode.i_block)
    if inode.inode.i_flags & _EXTENTS_FL:
        m.extent_node(i_block, None)
    else:
        pointers = struct.unpack("<15I", i_block[:60])
        for p in pointers[: min(m.blocks, 12)]:
            m.add(p or None, 1)
        per = m.block_size // 4
        for level in (1, 2, 3):
            remaining = m.blocks - m.position
            if remaining <= 0:
                break
            m.indirect(pointers[11 + level], level, min(remaining, per**level))
    if m.position < m.blocks:
        m.add(None, m.blocks - m.position)
    return m.runs


@functools.cache
def bounded_extfs() -> type:
    """dissect.extfs's ``ExtFS`` whose inodes map their blocks with :func:`ext_runs`."""
    from dissect.extfs.exceptions import Error
    from dissect.extfs.extfs import ExtFS, INode

    class BoundedINode(INode):  # type: ignore[misc]
        def dataruns(self) -> Runs:
            runs: Runs | None = self.__dict__.get("_runlist")
            if not runs:
                runs = self._runlist = ext_runs(self)
            return runs

    class BoundedExtFS(ExtFS):  # type: ignore[misc]
        def get_inode(self, inum: int, filename: str | None = None, filetype: int | None = None) -> Any:
            if inum < 1 or inum > self.sb.s_inodes_count:
                raise Error(f"inum out of range 1-{self.sb.s_inodes_count}: {inum}")
            return BoundedINode(self, inum, filename, filetype)

    return BoundedExtFS
