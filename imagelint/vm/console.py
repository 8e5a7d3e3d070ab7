"""The guest's serial console, read from QEMU's standard output from power-on, bounded.

The console is the image's text: kept as bytes, at most :data:`HEAD` bytes from its start and
:data:`TAIL` from its end (the rest counted, never stored), escaped by whoever shows it. Lines are
scanned as they arrive, each cut at :data:`LINE_MAX` bytes, for the two things the machine acts on:
the kernel's ``Linux version`` banner (the guest's kernel, and the sign a KVM probe waits for) and a
kernel panic. Every kernel line (one with the printk time) is also kept, up to :data:`KERNEL_KEPT`
bytes, the rest counted: :meth:`Console.log` hands them to the journal's signal rules
(:mod:`imagelint.facts.journal.console`), which judge the console as they judge a journal.
"""

from __future__ import annotations

import collections
import re
import threading
from pathlib import Path
from typing import IO

from imagelint.facts.journal.console import ConsoleLog, kernel_line
from imagelint.targets.rootfs import RootfsTarget

HEAD = 16 * 1024
TAIL = 64 * 1024
LINE_MAX = 4096
KERNEL_KEPT = 8 << 20  # bytes of kernel lines kept for the signal rules
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
        self.kernel_lines: list[bytes] = []
        self.kernel_bytes = 0
        self.kernel_dropped = 0
        self._line = bytearray()
        self._lock = threading.Lock()

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read1(4096), b""):  # type: ignore[attr-defined]
            self.feed(chunk)
        self.flush()

    def flush(self) -> None:
        """Scan the last line when the console ended without a newline (a panic's last words)."""
        if self._line:
            self._scan(bytes(self._line))
            self._line.clear()

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
        if kernel_line(line) is not None:
            with self._lock:
                if self.kernel_bytes + len(line) <= KERNEL_KEPT:
                    self.kernel_lines.append(line)
                    self.kernel_bytes += len(line)
                else:
                    self.kernel_dropped += 1
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

    def log(self, powered_on_usec: int) -> ConsoleLog:
        """The kernel lines read so far (and how many were over the budget), for the signal rules;
        ``powered_on_usec``: the wall time of power-on, which the printk times count from."""
        with self._lock:
            return ConsoleLog(tuple(self.kernel_lines), self.kernel_dropped, powered_on_usec)

    def summary(self) -> dict[str, object]:
        with self._lock:
            kept = min(self.total, len(self.head) + min(self.tail_size, TAIL))
            return {
                "bytes": self.total,
                "kept_bytes": kept,
                "kernel_lines": len(self.kernel_lines) + self.kernel_dropped,
                "kernel_lines_dropped": self.kernel_dropped,
            }


class ConsoleTarget(RootfsTarget):
    """What the console's part of a report names: the machine's console. The rules that judge it read
    only the console's kernel lines (a journal source), no file: the root is an empty directory."""

    kind = "console"

    def __init__(self, empty: Path, image: Path) -> None:
        super().__init__(empty)
        self.image = image

    @property
    def description(self) -> str:
        return f"serial console of {self.image}"
