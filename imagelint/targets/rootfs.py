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

import errno
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
MAX_CACHED_PREFIXES = 65536  # resolved directory prefixes kept (the cache is cleared when full)
MAX_WALK_ENTRIES = 2_000_000  # entries one glob or walk may visit before the run is inconclusive
MAX_WALK_DEPTH = 2048  # directory levels below the start (PATH_MAX allows ~2048 one-letter levels)


class FileKind(StrEnum):
    FILE = "file"
    DIR = "directory"
    SYMLINK = "symlink"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHAR_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    OTHER = "special file"


def kind_of(mode: int) -> FileKind:
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
        return cls(path, kind_of(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_size)


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


@dataclass(frozen=True)
class _Resolution:
    """Where resolving a path prefix got to: canonical components, whether one was missing, links used."""

    parts: tuple[str, ...]
    missing: bool
    links: int


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
        self._prefixes: dict[str, _Resolution] = {}  # resolved directory prefixes, by image path

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
        parts = _split(image_path)
        last = len(parts) if follow_last else len(parts) - 1
        # Start from the longest directory prefix already resolved: a walk or glob that descends
        # one level at a time then costs one step per level, not a lookup from the root.
        state = _Resolution((), missing=False, links=0)
        done = 0
        for i in range(last, 0, -1):
            hit = self._prefixes.get("/".join(parts[:i]))
            if hit is not None:
                state, done = hit, i
                break
        for i in range(done, len(parts)):
            follow = i < last
            state = self._step(image_path, state, parts[i], follow=follow)
            if follow and i + 1 < len(parts):
                self._remember("/".join(parts[: i + 1]), state)
        return "/" + "/".join(state.parts)

    def _remember(self, prefix: str, state: _Resolution) -> None:
        if len(self._prefixes) >= MAX_CACHED_PREFIXES:
            self._prefixes.clear()
        self._prefixes[prefix] = state

    def _step(self, image_path: str, state: _Resolution, name: str, *, follow: bool) -> _Resolution:
        """Resolve one more component (and the links it leads through) after an already-resolved prefix."""
        resolved = list(state.parts)
        missing, links = state.missing, state.links
        pending = [name]
        while pending:
            name = pending.pop()
            if name == "..":
                if resolved:
                    resolved.pop()
                continue
            if name == ".":
                continue
            if missing or (not pending and not follow):
                resolved.append(name)
                continue
            host = self.root.joinpath(*resolved, name)
            try:
                st = os.lstat(host)
            except (FileNotFoundError, NotADirectoryError):
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
        return _Resolution(tuple(resolved), missing=missing, links=links)

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
        fd = self.open_dir(image_path, self.host_path(resolved))
        if fd is None:
            return []
        try:
            return sorted(os.listdir(fd))
        except OSError as exc:
            raise ImageReadError(image_path, f"cannot list directory: {exc.strerror}") from None
        finally:
            os.close(fd)

    def _scan(self, image_dir: str, host_dir: Path) -> list[tuple[str, os.stat_result]]:
        """(name, lstat) of each entry of a resolved directory, sorted by name; [] when it is gone."""
        fd = self.open_dir(image_dir, host_dir)
        if fd is None:
            return []
        try:
            with os.scandir(fd) as it:
                return sorted(((e.name, e.stat(follow_symlinks=False)) for e in it), key=lambda p: p[0])
        except OSError as exc:
            raise ImageReadError(image_dir, f"cannot list directory: {exc.strerror}") from None
        finally:
            os.close(fd)

    @staticmethod
    def open_dir(image_path: str, host: str | Path) -> int | None:
        """A descriptor on a resolved directory, opened without touching its access time where allowed.

        None when it is missing or not a directory; the caller closes it (``os.scandir(fd)`` lists it).
        """
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            try:
                return os.open(host, flags | os.O_NOATIME)
            except PermissionError:  # O_NOATIME needs ownership or CAP_FOWNER
                return os.open(host, flags)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the last component is a link: not a directory of its own
                return None
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
        kind = kind_of(st.st_mode)
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
        with one. ``**`` does not descend through symlinked directories. Results are sorted. A
        match that would visit more than ``MAX_WALK_ENTRIES`` entries or ``MAX_WALK_DEPTH`` levels
        raises ImageReadError (the run is then inconclusive, never a pass).
        """
        matches: set[str] = set()
        budget = _Budget(pattern)
        # (matched components so far, the pattern components still to match, depth below a **)
        stack: list[tuple[tuple[str, ...], tuple[str, ...], int]] = [((), tuple(_split(pattern)), 0)]
        while stack:
            prefix, parts, depth = stack.pop()
            if not parts:
                path = "/" + "/".join(prefix)
                if self.lstat(path) is not None:
                    matches.add(path)
                continue
            head, rest = parts[0], parts[1:]
            if head == "**":
                stack.append((prefix, rest, depth))
                budget.descend(depth + 1, "/" + "/".join(prefix))
                for name, st in self._entries(prefix, budget):
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(((*prefix, name), parts, depth + 1))
            elif not _has_magic(head):
                stack.append(((*prefix, head), rest, depth))
            else:
                for name, _st in self._entries(prefix, budget):
                    if name.startswith(".") and not head.startswith("."):
                        continue
                    if fnmatch.fnmatchcase(name, head):
                        stack.append(((*prefix, name), rest, depth))
        return sorted(matches)

    def _entries(self, prefix: tuple[str, ...], budget: _Budget) -> list[tuple[str, os.stat_result]]:
        image_dir = "/" + "/".join(prefix)
        entries = self._scan(image_dir, self.host_path(self.resolve(image_dir)))
        budget.spend(len(entries))
        return entries

    def walk(self, top: str) -> Iterator[ImageStat]:
        """Every entry below ``top`` (not ``top`` itself), depth first, never following links.

        Bounded like :meth:`glob`: past ``MAX_WALK_ENTRIES`` entries or ``MAX_WALK_DEPTH`` levels
        it raises ImageReadError.
        """
        resolved = self.resolve(top)
        budget = _Budget(top)
        stack = [(top.rstrip("/") or "/", self.host_path(resolved), 0)]
        while stack:
            image_dir, host_dir, depth = stack.pop()
            budget.descend(depth, image_dir)
            entries = self._scan(image_dir, host_dir)
            budget.spend(len(entries))
            subdirs = []
            for name, os_stat in entries:
                path = f"{image_dir.rstrip('/')}/{name}"
                st = ImageStat.from_os(path, os_stat)
                yield st
                if st.kind is FileKind.DIR:
                    subdirs.append((path, host_dir / name, depth + 1))
            stack.extend(reversed(subdirs))


class _Budget:
    """How much one glob or walk may visit; exceeding it is an ImageReadError naming the start."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.entries = 0

    def spend(self, n: int) -> None:
        self.entries += n
        if self.entries > MAX_WALK_ENTRIES:
            raise ImageReadError(
                self.where, f"more than {MAX_WALK_ENTRIES:,} entries to visit; not read in full"
            )

    def descend(self, depth: int, where: str) -> None:
        if depth > MAX_WALK_DEPTH:
            raise ImageReadError(where, f"more than {MAX_WALK_DEPTH} directory levels deep; not read in full")
