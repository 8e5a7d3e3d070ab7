"""What a target is: the ``Target`` protocol every fact reads the image through, and its value types.

A target answers questions about *image paths* (``/etc/ssh/sshd_config``) resolved as a chroot at the
image root would resolve them. Implementations: a directory on this machine
(:class:`~imagelint.targets.rootfs.RootfsTarget`), a disk image file or a raw block stream
(:mod:`imagelint.targets.disk`). All of them share one resolver (:mod:`imagelint.targets.resolver`),
so the path rules (absolute links inside the image, ``..`` clamped at the root, the 40-link loop
limit, size caps, walk and glob budgets) are written once.

Large files (journals) are opened as a :class:`RandomAccessFile`: positioned reads, and a real file
descriptor when the target has one (a directory target), which readers use to ``mmap`` it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from enum import StrEnum
from typing import NamedTuple, Protocol, runtime_checkable


class FileKind(StrEnum):
    FILE = "file"
    DIR = "directory"
    SYMLINK = "symlink"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHAR_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    OTHER = "special file"


_KINDS = {
    stat.S_IFREG: FileKind.FILE,
    stat.S_IFDIR: FileKind.DIR,
    stat.S_IFLNK: FileKind.SYMLINK,
    stat.S_IFIFO: FileKind.FIFO,
    stat.S_IFSOCK: FileKind.SOCKET,
    stat.S_IFCHR: FileKind.CHAR_DEVICE,
    stat.S_IFBLK: FileKind.BLOCK_DEVICE,
}


_S_IFMT = 0o170000  # stat.S_IFMT(mode) is mode & this; stat.S_IMODE(mode) is mode & 0o7777
_S_IMODE = 0o7777


def kind_of(mode: int) -> FileKind:
    """The kind of a POSIX ``st_mode`` (one lookup: it is called for every entry a walk visits)."""
    return _KINDS.get(mode & _S_IFMT, FileKind.OTHER)


class ImageStat(NamedTuple):
    """What ``lstat`` says of one image path, in image terms. One is made for every entry a walk
    visits, so it is a named tuple: immutable like a frozen dataclass, and made in a third of the
    time (a frozen dataclass sets each field through ``object.__setattr__``)."""

    path: str
    kind: FileKind
    mode: int  # permission bits only (07777)
    uid: int
    gid: int
    size: int

    @classmethod
    def from_os(cls, path: str, st: os.stat_result) -> ImageStat:
        mode = st.st_mode
        kind = _KINDS.get(mode & _S_IFMT, FileKind.OTHER)  # kind_of, inlined: one call less per entry
        return cls(path, kind, mode & _S_IMODE, st.st_uid, st.st_gid, st.st_size)

    @classmethod
    def from_mode(cls, path: str, mode: int, uid: int, gid: int, size: int) -> ImageStat:
        return cls(path, kind_of(mode), mode & _S_IMODE, uid, gid, size)


def from_dir_entries(prefix: str, entries: Iterable[os.DirEntry[str]]) -> list[tuple[str, ImageStat]]:
    """(name, :meth:`ImageStat.from_os` of ``prefix + name`` and its lstat) of each directory entry.

    One is made for every entry a walk visits, so the loop makes them itself: ``kind_of`` inlined,
    the tuple made without the named tuple's ``__new__`` (two Python calls less per entry)."""
    new, kinds, other = tuple.__new__, _KINDS.get, FileKind.OTHER
    made = []
    for entry in entries:
        name = entry.name
        st = entry.stat(follow_symlinks=False)
        mode = st.st_mode
        kind = kinds(mode & _S_IFMT, other)
        made.append(
            (name, new(ImageStat, (prefix + name, kind, mode & _S_IMODE, st.st_uid, st.st_gid, st.st_size)))
        )
    return made


class TextContent(NamedTuple):
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


@runtime_checkable
class RandomAccessFile(Protocol):
    """A large regular file opened for reading at any offset; closed by the caller."""

    size: int

    def pread(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""

    def fileno(self) -> int | None:
        """A real descriptor on the file (for ``mmap``), or None when the target has none."""

    def close(self) -> None: ...


class Target(Protocol):
    """Where facts come from. Every read is of an image path, resolved inside the image."""

    kind: str

    @property
    def description(self) -> str:
        """What was opened, for reports (a directory, a disk image file, a snapshot id)."""

    def resolve(self, image_path: str, *, follow_last: bool = True) -> str: ...

    def lstat(self, image_path: str) -> ImageStat | None: ...

    def stat(self, image_path: str) -> ImageStat | None: ...

    def exists(self, image_path: str) -> bool: ...

    def readlink(self, image_path: str) -> str: ...

    def listdir(self, image_path: str) -> list[str]: ...

    def list_kinds(self, image_path: str, *, limit: int) -> dict[str, FileKind] | None:
        """name -> kind of a directory's entries (links not followed); None when it is not a directory.

        Stops after ``limit + 1`` entries, so a caller can tell "more than ``limit``" apart."""

    def read_bytes(self, image_path: str, *, limit: int | None = None) -> bytes: ...

    def read_text(self, image_path: str, *, limit: int | None = None) -> TextContent: ...

    def open_random(self, image_path: str) -> RandomAccessFile:
        """A regular file for positioned reads with no size cap (journals)."""

    def glob(self, pattern: str) -> list[str]: ...

    def walk(self, top: str) -> Iterator[ImageStat]: ...

    def facts(self) -> dict[str, object]:
        """What the target itself reports (what was opened, I/O counters); {} when nothing."""

    def damaged(self) -> list[tuple[str, str]]:
        """(image path, why) of each read so far that met damage (an ImageDamageError): data that is
        there and could not be read. Bounded; the run reports each, and cannot pass on them."""
