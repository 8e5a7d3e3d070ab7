"""Wrappers of the snapshot stream for tests and benchmarks, and what a disk image file's audit reads."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

BLOCK = 524288


class NoPrefetch(io.RawIOBase):
    """The snapshot stream without ``prefetch``: the disk target then gives no read hints."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._s = stream
        self.size = stream.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._s.seek(offset, whence)

    def tell(self) -> int:
        return self._s.tell()

    def readinto(self, buffer: Any) -> int:
        return self._s.readinto(buffer)

    def stats(self) -> dict[str, int]:
        return self._s.stats()


class ReadBlocks(io.RawIOBase):
    """A disk image file, noting the 512 KiB blocks read."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.f = path.open("rb")
        self.size = path.stat().st_size
        self.read_blocks: set[int] = set()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def tell(self) -> int:
        return self.f.tell()

    def readinto(self, buffer: Any) -> int:
        start = self.f.tell()
        n = self.f.readinto(buffer)
        if n:
            self.read_blocks.update(range(start // BLOCK, (start + n - 1) // BLOCK + 1))
        return n


def blocks_read(disk: Path) -> set[int]:
    """The blocks an audit with the built-in rules reads from ``disk`` (the same disk target code)."""
    from imagelint.engine import RunSettings, audit
    from imagelint.session import RunOptions, prepare
    from imagelint.targets.disk import open_disk_target

    stream = ReadBlocks(disk)
    packs, config = prepare(RunOptions()).rules
    audit(open_disk_target(stream, description=str(disk)), packs, config, RunSettings())
    stream.f.close()
    return stream.read_blocks


def differing(a: Path, b: Path) -> set[int]:
    with a.open("rb") as fa, b.open("rb") as fb:
        out, index = set(), 0
        while True:
            x, y = fa.read(BLOCK), fb.read(BLOCK)
            if not x and not y:
                return out
            if x != y:
                out.add(index)
            index += 1
