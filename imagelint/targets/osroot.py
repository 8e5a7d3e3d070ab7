"""Whether an opened target is an operating system's root: the marks every door asks for before it judges.

A gate must not pass what it was not given. An empty directory (a mount that failed), a documentation
folder or a half-extracted tarball holds no finding because it holds no system, so a target without
the marks of an OS root is inconclusive (exit 3), not clean. The marks, each resolved inside the
image as every read is (links followed as a chroot would):

- an os-release: ``/etc/os-release`` or ``/usr/lib/os-release``, a regular file;
- a ``/usr`` directory;
- an init: ``/sbin/init``, ``/usr/sbin/init``, ``/lib/systemd/systemd`` or
  ``/usr/lib/systemd/systemd``, a regular file.

A path that cannot be read safely (a link loop, a path a bundle's collector did not gather) is not a
mark. The running host (``--live``) is not asked: it is a system by being the one running.
"""

from __future__ import annotations

from typing import NamedTuple

from imagelint.errors import ImageReadError, TargetError
from imagelint.targets.interface import FileKind, Target

OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
USR = "/usr"
INITS = ("/sbin/init", "/usr/sbin/init", "/lib/systemd/systemd", "/usr/lib/systemd/systemd")
ALLOW_OPTION = "--allow-partial-root"


class Mark(NamedTuple):
    """One mark of an OS root: any of ``paths`` being of ``kind``."""

    name: str
    paths: tuple[str, ...]
    kind: FileKind

    def describe(self) -> str:
        return f"no {self.name} ({', '.join(self.paths)})"


MARKS = (
    Mark("os-release", OS_RELEASE, FileKind.FILE),
    Mark("usr tree", (USR,), FileKind.DIR),
    Mark("init", INITS, FileKind.FILE),
)
MARK_PATHS = tuple(p for m in MARKS for p in m.paths)  # what a collector gathers for the check


def _is(target: Target, path: str, kind: FileKind) -> bool:
    try:
        found = target.stat(path)
    except ImageReadError:
        return False
    return found is not None and found.kind == kind


def missing_marks(target: Target) -> list[Mark]:
    """The marks of an OS root ``target`` lacks ([] for an OS root)."""
    return [m for m in MARKS if not any(_is(target, p, m.kind) for p in m.paths)]


def require_os_root(target: Target, where: str) -> None:
    """Raise TargetError (exit 3), one line naming every missing mark, unless ``target`` is an OS root."""
    missing = missing_marks(target)
    if missing:
        lacks = "; ".join(m.describe() for m in missing)
        raise TargetError(
            f"not an operating system's root: {lacks}; inconclusive "
            f"({ALLOW_OPTION} audits a partial tree as it is)",
            where=where,
        )
