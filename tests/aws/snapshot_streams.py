"""Wrappers of the snapshot stream for tests and benchmarks."""

from __future__ import annotations

import io
from typing import Any


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
