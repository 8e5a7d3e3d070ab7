"""The mounted-image target: read a root filesystem directory and nothing outside it.

Paths given to this class are *image paths* (``/etc/ssh/sshd_config``). They are resolved the way
the kernel would resolve them inside a chroot at the image root, which is also what
``systemctl --root`` does: an absolute symlink target restarts at the image root, ``..`` at the
image root stays there, and more than 40 links in one lookup is a loop. A path can therefore never
reach the host's files.

Only regular files are ever opened: FIFOs, sockets and devices are refused after an ``lstat`` and
before any ``open`` (opening a FIFO would hang), every open uses ``O_NOFOLLOW | O_NONBLOCK`` so a
file swapped underneath us cannot do either, and reads are capped in size. Nothing here writes;
reads use ``O_NOATIME`` where the kernel allows it so the image's access times stay as they were.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

from imagelint.errors import ImageReadError, TargetError

MAX_SYMLINKS = 40  # the kernel's limit for one path lookup
DEFAULT_READ_LIMIT = 16 * 1024 * 1024


class FileKind(StrEnum):
    FILE = "file"
    DIR = "directory"
    SYMLINK = "symlink"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHAR_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    OTHER = "special file"


def _kind_of(mode: int) -> FileKind:
    for test, kind in (
        (stat.S_ISREG, FileKind.FILE),
        (stat.S_ISDIR, FileKind.DIR),
        (stat.S_ISLNK, FileKind.SYMLINK),
        (stat.S_ISFIFO, FileKind.FIFO),
        (stat.S_ISSOCK, FileKind.SOCKET),
        (stat.S_ISCHR, FileKind.CHAR_DEVICE),
        (stat.S_ISBLK, FileKind.BLOCK_DEVICE),
    ):
        if test(mode):
            return kind
    return FileKind.OTHER


@dataclass(frozen=True)
class ImageStat:
    """What ``lstat`` says of one image path, in image terms."""

    path: str
    kind: FileKind
    mode: int  # permission bits only (07777)
    uid: int
    gid: int
    size: int

    @classmethod
    def from_os(cls, path: str, st: os.stat_result) -> ImageStat:
        return cls(path, _kind_of(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_size)


@dataclass(frozen=True)
class TextContent:
    """A file decoded as UTF-8. Undecodable bytes are kept as surrogate escapes, never dropped."""

    text: str
    invalid_utf8_at: int | None  # byte offset of the first invalid sequence, if any


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def decode_text(data: bytes) -> TextContent:
    try:
        return TextContent(data.decode("utf-8"), None)
    except UnicodeDecodeError as exc:
        return TextContent(data.decode("utf-8", errors="surrogateescape"), exc.start)


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _has_magic(part: str) -> bool:
    return any(c in part for c in "*?[")


class RootfsTarget:
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
        self.read_limit = read_limit
        self._resolved: dict[tuple[str, bool], str | ImageReadError] = {}

    def __repr__(self) -> str:
        return f"RootfsTarget({str(self.root)!r})"

    @property
    def description(self) -> str:
        return str(self.root)

    # -- path resolution ---------------------------------------------------------------------

    def host_path(self, image_path: str) -> Path:
        """The host location of an already-resolved image path (no link following here)."""
        return self.root.joinpath(*_split(image_path))

    def resolve(self, image_path: str, *, follow_last: bool = True) -> str:
        """Canonical image path of ``image_path`` after following links inside the image.

        Components that do not exist are kept as written; callers find out by ``lstat``.
        Raises ImageReadError on a symlink loop.
        """
        key = (image_path, follow_last)
        cached = self._resolved.get(key)
        if cached is None:
            try:
                cached = self._resolve_uncached(image_path, follow_last)
            except ImageReadError as exc:
                cached = exc
            self._resolved[key] = cached
        if isinstance(cached, ImageReadError):
            raise cached
        return cached

    def _resolve_uncached(self, image_path: str, follow_last: bool) -> str:
        pending = _split(image_path)
        pending.reverse()  # a stack: the next component is at the end
        resolved: list[str] = []
        links = 0
        missing = False
        while pending:
            name = pending.pop()
            if name == "..":
                if resolved:
                    resolved.pop()
                continue
            if name == ".":
                continue
            if missing or (not pending and not follow_last):
                resolved.append(name)
                continue
            host = self.root.joinpath(*resolved, name)
            try:
                st = os.lstat(host)
            except FileNotFoundError:
                missing = True
                resolved.append(name)
                continue
            except NotADirectoryError:
                missing = True
                resolved.append(name)
                continue
            except OSError as exc:
                raise ImageReadError(image_path, f"cannot look up: {exc.strerror}") from None
            if not stat.S_ISLNK(st.st_mode):
                resolved.append(name)
                continue
            links += 1
            if links > MAX_SYMLINKS:
                where = "/" + "/".join([*resolved, name])
                raise ImageReadError(
                    image_path, f"too many levels of symbolic links (a symlink loop) at {where}"
                )
            try:
                target = os.readlink(host)
            except OSError as exc:
                raise ImageReadError(image_path, f"cannot read link: {exc.strerror}") from None
            if target.startswith("/"):
                resolved = []
            pending.extend(reversed(_split(target) if target.strip("/") else []))
        return "/" + "/".join(resolved)

    # -- metadata ----------------------------------------------------------------------------

    def lstat(self, image_path: str) -> ImageStat | None:
        """Stat the path itself (a final symlink is not followed); None when it does not exist."""
        return self._stat(image_path, follow_last=False)

    def stat(self, image_path: str) -> ImageStat | None:
        """Stat what the path points to inside the image; None when it does not exist."""
        return self._stat(image_path, follow_last=True)

    def _stat(self, image_path: str, *, follow_last: bool) -> ImageStat | None:
        resolved = self.resolve(image_path, follow_last=follow_last)
        try:
            st = os.lstat(self.host_path(resolved))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot stat: {exc.strerror}") from None
        return ImageStat.from_os(image_path, st)

    def exists(self, image_path: str) -> bool:
        return self.lstat(image_path) is not None

    def readlink(self, image_path: str) -> str:
        resolved = self.resolve(image_path, follow_last=False)
        try:
            return os.readlink(self.host_path(resolved))
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot read link: {exc.strerror}") from None

    def listdir(self, image_path: str) -> list[str]:
        """Sorted entry names of a directory; [] when the path is missing or not a directory."""
        resolved = self.resolve(image_path)
        try:
            return sorted(os.listdir(self.host_path(resolved)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot list directory: {exc.strerror}") from None

    # -- content -----------------------------------------------------------------------------

    def read_bytes(self, image_path: str, *, limit: int | None = None) -> bytes:
        """The content of a regular file, refusing anything else and anything over the cap."""
        limit = self.read_limit if limit is None else limit
        resolved = self.resolve(image_path)
        host = self.host_path(resolved)
        try:
            st = os.lstat(host)
        except (FileNotFoundError, NotADirectoryError):
            raise ImageReadError(image_path, "does not exist") from None
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot stat: {exc.strerror}") from None
        kind = _kind_of(st.st_mode)
        if kind is not FileKind.FILE:
            raise ImageReadError(image_path, f"is a {kind}, not a regular file; not opened")
        if st.st_size > limit:
            raise ImageReadError(
                image_path, f"is {human_size(st.st_size)}, over the {human_size(limit)} read limit"
            )
        fd = self._open_regular(image_path, host)
        try:
            chunks: list[bytes] = []
            remaining = limit + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot read: {exc.strerror}") from None
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) > limit:  # the file grew after lstat
            raise ImageReadError(image_path, f"is over the {human_size(limit)} read limit")
        return data

    def read_text(self, image_path: str, *, limit: int | None = None) -> TextContent:
        return decode_text(self.read_bytes(image_path, limit=limit))

    def open_file(self, image_path: str) -> BinaryIO:
        """Open a regular file for reading with no size cap (for large binary files such as journals).

        The same refusals as ``read_bytes`` apply: links resolve inside the image, and anything but
        a regular file is refused before it is opened. The caller closes the returned file
        (``mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)`` works on it).
        """
        resolved = self.resolve(image_path)
        host = self.host_path(resolved)
        st = self.lstat(resolved)
        if st is None:
            raise ImageReadError(image_path, "does not exist")
        if st.kind is not FileKind.FILE:
            raise ImageReadError(image_path, f"is a {st.kind}, not a regular file; not opened")
        return os.fdopen(self._open_regular(image_path, host), "rb")

    @staticmethod
    def _open_regular(image_path: str, host: Path) -> int:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            try:
                fd = os.open(host, flags | os.O_NOATIME)
            except PermissionError:  # O_NOATIME needs ownership or CAP_FOWNER
                fd = os.open(host, flags)
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot open: {exc.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ImageReadError(image_path, "changed into a special file while being opened; not read")
        return fd

    # -- enumeration ------------------------------------------------------------------------

    def glob(self, pattern: str) -> list[str]:
        """Image paths matching a shell-style pattern (``*``, ``?``, ``[..]``, and ``**`` for any depth).

        As in the shell, a wildcard matches a leading dot only when the pattern component starts
        with one. ``**`` does not descend through symlinked directories. Results are sorted.
        """
        matches: set[str] = set()
        self._glob_into(matches, [], _split(pattern))
        return sorted(matches)

    def _glob_into(self, out: set[str], prefix: list[str], parts: list[str]) -> None:
        if not parts:
            path = "/" + "/".join(prefix)
            if self.lstat(path) is not None:
                out.add(path)
            return
        head, rest = parts[0], parts[1:]
        base = "/" + "/".join(prefix)
        if head == "**":
            self._glob_into(out, prefix, rest)
            for name in self.listdir(base):
                child = [*prefix, name]
                st = self.lstat("/" + "/".join(child))
                if st is not None and st.kind is FileKind.DIR:
                    self._glob_into(out, child, parts)
            return
        if not _has_magic(head):
            self._glob_into(out, [*prefix, head], rest)
            return
        for name in self.listdir(base):
            if name.startswith(".") and not head.startswith("."):
                continue
            if fnmatch.fnmatchcase(name, head):
                self._glob_into(out, [*prefix, name], rest)

    def walk(self, top: str) -> Iterator[ImageStat]:
        """Every entry below ``top`` (not ``top`` itself), depth first, never following links."""
        resolved = self.resolve(top)
        stack = [(top.rstrip("/") or "/", self.host_path(resolved))]
        while stack:
            image_dir, host_dir = stack.pop()
            try:
                entries = sorted(os.scandir(host_dir), key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise ImageReadError(image_dir, f"cannot list directory: {exc.strerror}") from None
            subdirs = []
            for entry in entries:
                path = f"{image_dir.rstrip('/')}/{entry.name}"
                st = ImageStat.from_os(path, entry.stat(follow_symlinks=False))
                yield st
                if st.kind is FileKind.DIR:
                    subdirs.append((path, Path(entry.path)))
            stack.extend(reversed(subdirs))
