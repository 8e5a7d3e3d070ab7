"""The node_exporter textfile collector output: ``DIR/imagelint.prom``, replaced atomically.

node_exporter reads every ``*.prom`` file in its ``--collector.textfile.directory`` at each scrape.
The new content goes to a fresh temporary file in the same directory (same filesystem, so the rename
is atomic; its name does not end in ``.prom``, so it is never read half-written), is flushed to disk,
made world-readable, and renamed over the old file by :func:`imagelint.outputfile.replace`: only
when the file is absent or this user's own regular file, never through a link planted there.
"""

from __future__ import annotations

import os
from pathlib import Path

from imagelint import outputfile
from imagelint.errors import UsageError

FILENAME = "imagelint.prom"


def check_directory(directory: str) -> None:
    """Refuse at start a directory the watch could not write into, or a textfile it would not
    replace (a link, a FIFO, another user's file): usage errors, exit 2."""
    if not os.path.isdir(directory):
        raise UsageError("not a directory", where=f"--textfile {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError("directory is not writable", where=f"--textfile {directory}")
    outputfile.check(Path(directory, FILENAME))


def write_atomically(directory: str, content: bytes, filename: str = FILENAME) -> str:
    final = os.path.join(directory, filename)
    outputfile.replace(Path(final), content, mode=0o644)
    return final
