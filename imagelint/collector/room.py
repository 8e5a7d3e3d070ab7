"""Scratch space for one host's bundle, checked before a byte of it is written.

A run over many hosts keeps each host's bundle on local disk while it is judged (at most
:data:`~imagelint.collector.MAX_BUNDLE` bytes per host, a few hosts at a time). Before one is written
its announced size (the SSH header, S3's ``Content-Length``) is held against the free space of the
directory it goes to: a bundle that cannot fit makes that host inconclusive, with the figures, rather
than filling the disk under the other hosts. Space can still run out while the bundle is written
(something else filled the disk meanwhile); the callers make that host's row of that error too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from imagelint.errors import ExitCode, ImageLintError

RESERVE = 16 * 1024 * 1024  # bytes left free beside a bundle: its extraction's own files, the report


class NoRoomError(ImageLintError):
    """The scratch directory has no room for a host's bundle: that host is inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


def check_room(directory: Path, size: int, where: str) -> None:
    """Refuse (:class:`NoRoomError`) to write ``size`` bytes into ``directory`` without room for them
    and :data:`RESERVE` beside."""
    free = shutil.disk_usage(directory).free
    if free < size + RESERVE:
        raise NoRoomError(
            f"no room for its bundle in the local scratch space {directory.parent}: {size:,} bytes "
            f"announced, {free:,} free (with {RESERVE:,} kept free): set TMPDIR to a larger filesystem",
            where=where,
        )
