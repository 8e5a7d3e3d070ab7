"""The guest's serial console, read from QEMU's standard output from power-on, bounded.

The console is the image's text: kept as bytes, at most :data:`HEAD` bytes from its start and
:data:`TAIL` from its end (the rest counted, never stored), escaped by whoever shows it. Lines are
scanned as they arrive, each cut at :data:`LINE_MAX` bytes, for the two things the machine acts on:
the kernel's ``Linux version`` banner (the guest's kernel, and the sign a KVM probe waits for) and a
kernel panic.
"""

from __future__ import annotations

import collections
import re
import threading
from typing import IO

HEAD = 16 * 1024
TAIL = 64 * 1024
LINE_MAX = 4096
_BANNER = re.compile(rb"Linux version ([0-9A-Za-z._+~-]{1,64})")
_PANIC = re.compile(rb"Kernel panic - not syncing[^\r\n]{0,200}")


class Console(threading.Thread):
    """Reads ``stream`` to its end in the background (QEMU's ``-serial stdio``)."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True, name="vm-console")
        self.stream = stream
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.total = 0
        self.kernel: str | None = None
        self.panic: str | None = None
        self.banner = threading.Event()
        self._line = bytearray()
        self._lock = threading.Lock()

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read1(4096), b""):  # type: ignore[attr-defined]
            self.feed(chunk)

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            room = HEAD - len(self.head)
            if room > 0:
                self.head += chunk[:room]
            self.tail.append(chunk)
            self.tail_size += len(chunk)
            while self.tail_size - len(self.tail[0]) >= TAIL:
                self.tail_size -= len(self.tail.popleft())
        for piece in re.split(rb"(\n)", chunk):
            if piece == b"\n":
                self._scan(bytes(self._line))
                self._line.clear()
            elif len(self._line) < LINE_MAX:
                self._line += piece[: LINE_MAX - len(self._line)]

    def _scan(self, line: bytes) -> None:
        if self.kernel is None and (found := _BANNER.search(line)):
            self.kernel = found.group(1).decode("ascii")
            self.banner.set()
        if self.panic is None and (found := _PANIC.search(line)):
            self.panic = found.group(0).decode("utf-8", "replace")

    def last(self, size: int = 4096) -> str:
        """The last ``size`` bytes of the console as text (the caller escapes it for its channel)."""
        with self._lock:
            data = b"".join(self.tail)[-size:]
        return data.decode("utf-8", "replace")

    def summary(self) -> dict[str, object]:
        with self._lock:
            kept = min(self.total, len(self.head) + min(self.tail_size, TAIL))
            return {"bytes": self.total, "kept_bytes": kept}
