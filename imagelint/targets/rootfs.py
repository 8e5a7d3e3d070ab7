"""The mounted-image target: read a root filesystem directory and nothing outside it.

Paths given to this class are *image paths* (``/etc/ssh/sshd_config``), resolved by the shared
resolver (:mod:`imagelint.targets.resolver`) the way the kernel would resolve them inside a chroot
at the image root, which is also what ``systemctl --root`` does. A path can therefore never reach
the host's files. This module only supplies the primitive operations on already-resolved paths.

Only regular files are ever opened: FIFOs, sockets and devices are refused after an ``lstat`` and
before any ``open`` (opening a FIFO would hang), every open uses ``O_NOFOLLOW | O_NONBLOCK`` so a
file swapped underneath us cannot do either, and reads are capped in size. Nothing here writes;
reads use ``O_NOATIME`` where the kernel allows it so the image's access times stay as they were.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from pathlib import Path

from imagelint.errors import ImageReadError, TargetError, os_reason
from imagelint.targets.interface import (
    FileKind,
    ImageStat,
    TextContent,
    decode_text,
    from_dir_entries,
    human_size,
    kind_of,
)
from imagelint.targets.resolver import (
    DEFAULT_READ_LIMIT,
    MAX_CACHED_PREFIXES,
    MAX_SYMLINKS,
    MAX_WALK_DEPTH,
    MAX_WALK_ENTRIES,
    Parts,
    ResolvingTarget,
    entry_path,
)

__all__ = [
    "DEFAULT_READ_LIMIT",
    "MAX_CACHED_PREFIXES",
    "MAX_SYMLINKS",
    "MAX_WALK_DEPTH",
    "MAX_WALK_ENTRIES",
    "FileKind",
    "HostFile",
    "ImageStat",
    "RootfsTarget",
    "TextContent",
    "decode_text",
    "human_size",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class HostFile:
    """A regular file on this machine read by ``pread`` on its descriptor (``fileno()`` for ``mmap``)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.size = os.fstat(fd).st_size

    def pread(self, offset: int, length: int) -> bytes:
        return os.pread(self._fd, length, offset)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> HostFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_noatime(path: str | Path, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_NOATIME)
    except PermissionError:  # O_NOATIME needs ownership or CAP_FOWNER
        return os.open(path, flags)


def open_regular(image_path: str, host: str | Path) -> int:
    """A descriptor on a regular file, opened without following a final link and without blocking.

    Raises ImageReadError when it cannot be opened or turns out not to be a regular file."""
    try:
        fd = _open_noatime(host, _FILE_FLAGS)
    except OSError as exc:
        raise ImageReadError(image_path, f"cannot open: {os_reason(exc)}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ImageReadError(image_path, "changed into a special file while being opened; not read")
    return fd


class _HostDirectory:
    """The backend: primitive operations on resolved paths below one host directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._prefix = str(root).rstrip("/") + "/"

    def host(self, parts: Parts) -> Path:
        return self.root.joinpath(*parts)

    def _host(self, parts: Parts) -> str:
        """The host path as a string: no path object per operation (one per directory a walk lists)."""
        return self._prefix + "/".join(parts)

    def lstat(self, parts: Parts) -> ImageStat | None:
        try:
            st = os.lstat(self._host(parts))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return ImageStat.from_os("/" + "/".join(parts), st)

    def readlink(self, parts: Parts) -> str:
        return os.readlink(self._host(parts))

    def _open_dir(self, parts: Parts) -> int | None:
        try:
            return _open_noatime(self._host(parts), _DIR_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the last component is a link: not a directory of its own
                return None
            raise

    def scan(self, parts: Parts, limit: int, image_dir: str) -> list[tuple[str, ImageStat]] | None:
        fd = self._open_dir(parts)
        if fd is None:
            return None
        prefix = entry_path(image_dir, "")  # each entry's path is this and its name
        try:
            with os.scandir(fd) as it:
                return from_dir_entries(prefix, itertools.islice(it, limit + 1))
        finally:
            os.close(fd)

    def kinds(self, parts: Parts, limit: int) -> dict[str, FileKind] | None:
        fd = self._open_dir(parts)
        if fd is None:
            return None
        try:
            with os.scandir(fd) as it:
                listing: dict[str, FileKind] = {}
                for e in it:
                    listing[e.name] = _entry_kind(e)
                    if len(listing) > limit:
                        break
                return listing
        finally:
            os.close(fd)

    def open(self, parts: Parts) -> HostFile:
        return HostFile(open_regular("/" + "/".join(parts), self._host(parts)))


def _entry_kind(entry: os.DirEntry[str]) -> FileKind:
    if entry.is_symlink():
        return FileKind.SYMLINK
    if entry.is_dir(follow_symlinks=False):
        return FileKind.DIR
    if entry.is_file(follow_symlinks=False):
        return FileKind.FILE
    return kind_of(entry.stat(follow_symlinks=False).st_mode)


class RootfsTarget(ResolvingTarget):
    """A root filesystem directory on this machine (a mounted image, a chroot, a debootstrap tree)."""

    kind = "rootfs"

    def __init__(self, root: str | os.PathLike[str], *, read_limit: int = DEFAULT_READ_LIMIT) -> None:
        path = Path(root)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise TargetError("image root does not exist", where=str(root)) from None
        except OSError as exc:
            raise TargetError(f"image root cannot be read: {exc.strerror}", where=str(root)) from None
        if not stat.S_ISDIR(st.st_mode):
            raise TargetError("image root is not a directory", where=str(root))
        if not os.access(path, os.R_OK | os.X_OK):
            raise TargetError("image root is not readable by this user", where=str(root))
        self.root = path.resolve()
        self._dir = _HostDirectory(self.root)
        super().__init__(self._dir, read_limit=read_limit)

    def __repr__(self) -> str:
        return f"RootfsTarget({str(self.root)!r})"

    @property
    def description(self) -> str:
        return str(self.root)
