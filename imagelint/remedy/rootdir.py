"""Writing inside an image root directory, and nowhere else.

Every image path is first resolved as a chroot would resolve it, by the resolver the audit uses
(:class:`imagelint.targets.rootfs.RootfsTarget`: absolute links inside the image, ``..`` clamped at the
root), and then reached from a descriptor on the root one component at a time with ``O_NOFOLLOW``:
a link that appears between the two is refused (``ImageReadError``), never followed out of the root.
Each operation works on (parent descriptor, name), so the last component is never followed either.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from imagelint.errors import ImageReadError
from imagelint.targets.rootfs import RootfsTarget

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RootDir:
    """A root directory the remedy may change."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def target(self) -> RootfsTarget:
        """A fresh view of the tree (its resolution cache holds nothing from before a change)."""
        return RootfsTarget(self.root)

    def canonical(self, image_path: str) -> str:
        """The image path with every link before its last component resolved inside the image."""
        return self.target().resolve(image_path, follow_last=False)

    def host(self, image_path: str) -> str:
        """The host path of a canonical image path, as systemctl --root spells it ("" for root /)."""
        prefix = "" if str(self.root) == "/" else str(self.root)
        return prefix + (image_path if image_path != "/" else "")

    @contextlib.contextmanager
    def parent(
        self, image_path: str, *, create: bool = False, resolve: bool = True
    ) -> Iterator[tuple[int | None, str]]:
        """(descriptor of the parent directory, last component) of ``image_path``; the descriptor is
        None when a parent does not exist (and ``create`` is false). With ``resolve`` false the path
        is taken as written: a link anywhere on the way is refused, as the fix script refuses it."""
        canonical = self.canonical(image_path) if resolve else image_path
        parts = [p for p in canonical.split("/") if p]
        if not resolve and any(p in (".", "..") for p in parts):
            raise ImageReadError(image_path, "is not a canonical path; not changed")
        if not parts:
            raise ImageReadError(image_path, "is the image root itself; not changed")
        fd = os.open(self.root, _DIR)
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    nfd = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        fd = -1
                        break
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nfd = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    where = "/" + "/".join(parts[: i + 1])
                    st = self.lstat(fd, part)
                    if st is not None and stat.S_ISLNK(st.st_mode):
                        raise ImageReadError(where, "is a link on the way; not followed") from None
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise ImageReadError(
                            where, "is not a directory (or became a link); not followed"
                        ) from None
                    raise ImageReadError(where, f"cannot open: {exc.strerror}") from None
                os.close(fd)
                fd = nfd
            yield (fd if fd >= 0 else None), parts[-1]
        finally:
            if fd >= 0:
                os.close(fd)

    @staticmethod
    def lstat(fd: int, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    @staticmethod
    def remove(fd: int, name: str) -> bool:
        """Remove a file, link or whole directory tree (links inside are removed, never followed)."""
        st = RootDir.lstat(fd, name)
        if st is None:
            return False
        if stat.S_ISDIR(st.st_mode):
            import shutil

            shutil.rmtree(name, dir_fd=fd)  # descriptor-based: safe against links inside the tree
        else:
            os.unlink(name, dir_fd=fd)
        return True

    @staticmethod
    @contextlib.contextmanager
    def opened(fd: int, name: str, flags: int, where: str) -> Iterator[int]:
        """A descriptor on an existing entry that is not a link."""
        try:
            ffd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError as exc:
            raise ImageReadError(where, f"cannot open without following a link: {exc.strerror}") from None
        try:
            yield ffd
        finally:
            os.close(ffd)
