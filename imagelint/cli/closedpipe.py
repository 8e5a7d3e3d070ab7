"""Standard output that a reader closed early (``imagelint rules list | head -1``) is quiet.

Python ignores SIGPIPE, so a write to a pipe whose reader is gone raises ``BrokenPipeError``; click
turns that into exit 1, which for ``audit`` reads as "fail". Here stdout is rebuilt over a writer
that, once the reader is gone, drops what is written: the command runs to its end and exits with its
own code (an audit's verdict, 0 for a listing), with nothing on stderr.
"""

from __future__ import annotations

import io
import os
import sys


class _DropWhenClosed(io.RawIOBase):
    """File descriptor 1, whose writes are dropped once the reader has closed the pipe."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.reader_gone = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if not self.reader_gone:
            try:
                return os.write(self._fd, data)
            except BrokenPipeError:
                self.reader_gone = True
        return len(data)


def quiet_on_closed_pipe() -> None:
    """Replace ``sys.stdout`` with the same stream over a writer that survives a closed pipe."""
    old = sys.stdout
    try:
        fd = old.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): leave it
        return
    old.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_DropWhenClosed(fd)),
        encoding=old.encoding,
        errors=old.errors,
        line_buffering=bool(getattr(old, "line_buffering", False)),
        write_through=True,
    )
