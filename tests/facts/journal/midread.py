"""Telling, from outside, that a process is in the middle of reading a file, whatever way it reads.

A file it has mapped shows in ``/proc/PID/maps``; a file it reads with ``pread`` is one of its open
descriptors while ``rchar`` (bytes it read by system calls, ``/proc/PID/io``) grows. Either way, a
test that changes the file at that moment changes it under the reader, not before or after it.
imagelint runs each command in a child (imagelint.cli.box): the reader is the process started or
one of its children.
"""

from __future__ import annotations

import os
from pathlib import Path

READ_SINCE_OPEN = 256 * 1024  # bytes read with the file open: past its header, inside the read


class MidRead:
    """A predicate: ``pid`` maps ``path``, or holds it open and has read ``READ_SINCE_OPEN`` since."""

    def __init__(self, pid: int, path: Path) -> None:
        self.started = Path(f"/proc/{pid}")
        self.proc = self.started
        self.path = os.path.realpath(path)
        self._rchar_at_open: int | None = None

    def _reader(self) -> Path:
        """The process started, or its child once it has one (the box's command runs there)."""
        try:
            children = (self.started / "task" / self.started.name / "children").read_text().split()
        except OSError:
            children = []
        return Path(f"/proc/{children[0]}") if children else self.started

    def _holds_open(self) -> bool:
        for fd in os.listdir(self.proc / "fd"):
            try:
                if os.readlink(self.proc / "fd" / fd) == self.path:
                    return True
            except OSError:  # closed since the listing
                continue
        return False

    def __call__(self) -> bool:
        try:
            self.proc = self._reader()
            return self._reading()
        except OSError:  # the process ended between two looks
            return False

    def _reading(self) -> bool:
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
