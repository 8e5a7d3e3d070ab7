"""The node_exporter textfile collector output: ``DIR/imagelint.prom``, replaced atomically.

node_exporter reads every ``*.prom`` file in its ``--collector.textfile.directory`` at each scrape.
The new content goes to a temporary file in the same directory (same filesystem, so the rename is
atomic; its name does not end in ``.prom``, so it is never read half-written), is flushed to disk,
made world-readable, and renamed over the old file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

from imagelint.errors import UsageError

FILENAME = "imagelint.prom"


def check_directory(directory: str) -> None:
    """Refuse at start a directory the watch could not write into (usage error: exit 2)."""
    if not os.path.isdir(directory):
        raise UsageError("not a directory", where=f"--textfile {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError("directory is not writable", where=f"--textfile {directory}")


def write_atomically(directory: str, content: bytes, filename: str = FILENAME) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        final = os.path.join(directory, filename)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return final
