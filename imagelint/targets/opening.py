"""Opening a target named on the command line: the one place an argument becomes a ``Target``.

``audit`` and both sides of ``imagelint diff`` open their image through :func:`open_target`, so a
new kind of target (a disk image file, a snapshot) is added here once and every command accepts
it. It is a context manager: a target that needs setting up (attaching, mounting) is torn down
when the command is done, in every outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from imagelint.targets.rootfs import RootfsTarget


@contextmanager
def open_target(argument: Path) -> Iterator[RootfsTarget]:
    """The target ``argument`` names: an image root directory (a mounted image, a chroot).

    Raises TargetError (exit 3) when it does not exist or cannot be read.
    """
    yield RootfsTarget(argument)
