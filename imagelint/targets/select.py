"""From a command-line path to a target: a directory is a mounted image, a regular file a disk image.

Anything else (a FIFO, a socket, a device node) is refused with one line before it is opened: a FIFO
would block the run, a device would be the host's disk, not an image file.
"""

from __future__ import annotations

import os
import stat

from imagelint.errors import TargetError, UsageError
from imagelint.targets.interface import Target


def open_target(path: str | os.PathLike[str], *, partition: int | None = None) -> Target:
    """A :class:`RootfsTarget` for a directory, a disk image target for a file (found by content).

    Raises TargetError (exit 3) when it cannot be read or is neither, UsageError (exit 2) for
    ``--partition`` on a directory or when the disk extra is not installed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0  # missing or unreadable: the directory target says so, as before
    if stat.S_ISREG(mode):
        from imagelint.targets.disk import open_disk_file

        return open_disk_file(path, partition=partition)
    if mode and not stat.S_ISDIR(mode):
        from imagelint.targets.disk.open import refuse_special

        refuse_special(os.fspath(path), mode)
        raise TargetError("not a regular file or a directory", where=os.fspath(path))
    if partition is not None:
        raise UsageError(f"--partition applies to disk image files, not to the directory {os.fspath(path)}")
    from imagelint.targets.rootfs import RootfsTarget

    return RootfsTarget(path)
