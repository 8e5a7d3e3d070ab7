"""Telling, from outside, that a process is in the middle of reading a file, whatever way it reads.

A file it has mapped shows in ``/proc/PID/maps``; a file it reads with ``pread`` is one of its open
descriptors while ``rchar`` (bytes it read by system calls, ``/proc/PID/io``) grows. Either way, a
test that changes the file at that moment changes it under the reader, not before or after it.
"""

from __future__ import annotations

import os
from pathlib import Path

READ_SINCE_OPEN = 256 * 1024  # bytes read with the file open: past its header, inside the read


class MidRead:
    """A predicate: ``pid`` maps ``path``, or holds it open and has read ``READ_SINCE_OPEN`` since."""

    def __init__(self, pid: int, path: Path) -> None:
        self.proc = Path(f"/proc/{pid}")
        self.path = os.path.realpath(path)
        self._rchar_at_open: int | None = None

    def _holds_open(self) -> bool:
        for fd in os.listdir(self.proc / "fd"):
            try:
                if os.readlink(self.proc / "fd" / fd) == self.path:
                    return True
            except OSError:  # closed since the listing
                continue
        return False

    def __call__(self) -> bool:
        if self.path in (self.proc / "maps").read_text():
            return True
        if not self._holds_open():
            self._rchar_at_open = None
            return False
        io = dict(line.split(": ") for line in (self.proc / "io").read_text().splitlines())
        rchar = int(io["rchar"])
        if self._rchar_at_open is None:
            self._rchar_at_open = rchar
        return rchar - self._rchar_at_open >= READ_SINCE_OPEN
