"""From a command-line path to a target: a directory is a mounted image, a regular file a disk image."""

from __future__ import annotations

import os

from imagelint import limits
from imagelint.errors import UsageError
from imagelint.targets.interface import Target


def open_target(path: str | os.PathLike[str], *, partition: int | None = None) -> Target:
    """A :class:`RootfsTarget` for a directory, a disk image target for a file (found by content).

    Raises TargetError (exit 3) when it cannot be read, UsageError (exit 2) for ``--partition`` on
    a directory or when the disk extra is not installed."""
    limits.now_reading(path)  # a limit met from here on is reported with this path
    if os.path.isfile(path):
        from imagelint.targets.disk import open_disk_file

        return open_disk_file(path, partition=partition)
    if partition is not None:
        raise UsageError(f"--partition applies to disk image files, not to the directory {os.fspath(path)}")
    from imagelint.targets.rootfs import RootfsTarget

    return RootfsTarget(path)
