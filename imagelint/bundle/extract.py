"""Unpacking an untrusted bundle into a private directory, with every check written out.

The bundle comes from a machine we do not trust. Each member is checked before anything is
written, and the whole bundle is refused (:class:`BundleError`, exit 3) at the first member that
fails a check:

- names: ``./<image path>`` (the image) or ``imagelint/…`` (the collector's records), nothing else:
  no absolute names, no ``..`` component, no NUL, at most 4,096 bytes and 512 components;
- types: directories, regular files and (in the image part only) symbolic links. Hard links,
  devices, FIFOs, sparse and other special members are refused;
- symbolic links are created as links and never followed while extracting: every directory on
  the way to a member is opened with ``O_NOFOLLOW`` relative to its parent, so a member "below" a
  symlink is refused instead of being written through it;
- each name at most once; regular files created with ``O_EXCL``, mode 0600 (directories 0700):
  the image's modes and owners are kept as data (:attr:`Extracted.table`), never applied;
- sizes: each file, the total content, the member count and the decompressed stream (a gzip bomb)
  are capped;
- headers: tarfile reads a pax or GNU long-name header whole into memory and parses pax records
  with a regex that is quadratic on crafted input (CVE-2024-6232, unfixed in Python 3.11.7), so
  every extended header is checked before tarfile reads it (:class:`_HeaderBudget`): at most
  ``MAX_EXTENDED`` bytes each, pax ones ``MAX_PAX_TOTAL`` bytes in all, at most ``MAX_CHAIN`` in a
  row before a member; GNU sparse members (whose maps tarfile reads block after block) are refused
  before their map is read.

- members: the image part holds exactly the members the collector listed in
  ``imagelint/members.txt`` (when it wrote one), so a member renamed by damage is refused.

Regular files the collector described without content (``stat`` lines of the manifest) become
empty placeholders, so that listings show them, and are marked so that reading them is an error.
They are hard links to one empty file beside the tree (making an inode each costs far more: a
bundle describes thousands).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import re
import shutil
import stat as stat_mod
import tarfile
import tempfile
from dataclasses import field
from pathlib import Path
from typing import IO, Any

from imagelint.bundle.manifest import OWN_LINES, Manifest, read_manifest
from imagelint.errors import ExitCode, ImageLintError
from imagelint.records import dataclass
from imagelint.targets.rootfs import FileKind, ImageStat

MAX_NAME = 4096
MAX_COMPONENTS = 512
META_FILE_CAP = 64 * 1024 * 1024
# An extended header holds a name and a link target (4,096 bytes each at most here) and a few
# attributes; GNU tar (the collector's) writes only long-name ones. 1 MiB of pax records in all
# bounds tarfile's quadratic record regex to about a second.
MAX_EXTENDED = 16 * 1024
MAX_PAX_TOTAL = 1024 * 1024
MAX_CHAIN = 4
_RECORD_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_LONG_NAMES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
_PAX = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


class BundleError(ImageLintError):
    """The bundle cannot be used: the run is inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


@dataclass(frozen=True)
class Caps:
    file: int = 256 * 1024 * 1024  # one image file (the collector's journal cap is the largest)
    total: int = 768 * 1024 * 1024  # all extracted content
    members: int = 400_000
    stream: int = 1536 * 1024 * 1024  # decompressed bytes read in all (headers included)


@dataclass
class Extracted:
    """An unpacked bundle: ``root`` holds the image part, ``meta`` the collector's records."""

    directory: Path
    root: Path
    meta: Path
    table: dict[str, ImageStat] = field(default_factory=dict)  # image path -> metadata from the bundle
    missing: dict[str, str] = field(default_factory=dict)  # image path -> why its content is absent
    manifest: Manifest = field(default_factory=Manifest)

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class _Counted:
    """A reader that refuses to produce more than ``cap`` bytes (a decompression bomb)."""

    def __init__(self, inner: IO[bytes], cap: int, where: str) -> None:
        self.inner, self.cap, self.where, self.count = inner, cap, where, 0

    def read(self, n: int = -1) -> bytes:
        data = self.inner.read(n if n >= 0 else 1 << 20)
        self.count += len(data)
        if self.count > self.cap:
            raise BundleError(f"decompresses to more than {self.cap:,} bytes; refused", where=self.where)
        return data


class _HeaderRefused(Exception):
    """An extended header over its bound (raised inside tarfile; made a BundleError by the caller)."""


class _HeaderBudget:
    """What tarfile may read of extended headers in one bundle."""

    def __init__(self) -> None:
        self.pax = 0
        self.chain = 0

    def tarinfo(self) -> type[tarfile.TarInfo]:
        """A TarInfo class that checks each header's size and type before tarfile processes it."""
        budget = self

        class Bounded(tarfile.TarInfo):
            def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
                budget.check(self)
                if self.type not in _LONG_NAMES + _PAX:
                    return super()._proc_member(tar)  # type: ignore[misc, no-any-return]
                budget.chain += 1  # the member this header describes is read inside this call
                try:
                    return super()._proc_member(tar)  # type: ignore[misc, no-any-return]
                finally:
                    budget.chain -= 1

        return Bounded

    def check(self, info: tarfile.TarInfo) -> None:
        if info.type == tarfile.GNUTYPE_SPARSE:
            raise _HeaderRefused(f"member {info.name[:200]!r} is a GNU sparse file; refused")
        if info.type not in _LONG_NAMES + _PAX:
            return
        what = "a pax" if info.type in _PAX else "a GNU long-name"
        if info.size > MAX_EXTENDED:
            raise _HeaderRefused(f"{what} header of {info.size:,} bytes, over {MAX_EXTENDED:,}; refused")
        if self.chain >= MAX_CHAIN:
            raise _HeaderRefused(f"more than {MAX_CHAIN} extended headers before one member; refused")
        if info.type in _PAX:
            self.pax += info.size
            if self.pax > MAX_PAX_TOTAL:
                raise _HeaderRefused(f"more than {MAX_PAX_TOTAL:,} bytes of pax headers; refused")


def _parts(name: str, where: str) -> tuple[str, list[str]]:
    """(area, path components) of a member name, or BundleError."""
    if "\0" in name or len(name.encode("utf-8", "surrogateescape")) > MAX_NAME:
        raise BundleError(f"member name {name[:80]!r}: NUL or longer than {MAX_NAME} bytes", where=where)
    if name == "." or name.startswith("./"):
        area, rest = "root", name[1:]
    elif name == "imagelint" or name.startswith("imagelint/"):
        area, rest = "meta", name[len("imagelint") :]
    else:
        raise BundleError(f"member {name[:200]!r}: neither ./<image path> nor imagelint/…", where=where)
    parts = [p for p in rest.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BundleError(f"member {name[:200]!r}: a '..' component; refused", where=where)
    if len(parts) > MAX_COMPONENTS:
        raise BundleError(f"member {name[:200]!r}: more than {MAX_COMPONENTS} components", where=where)
    if area == "meta" and not all(_RECORD_NAME.fullmatch(p) for p in parts):
        # the collector's own names; they are printed in messages as they are
        raise BundleError(f"member {name[:200]!r}: not a name the collector writes; refused", where=where)
    return area, parts


def _open_parent(base_fd: int, parts: list[str], name: str, where: str) -> int:
    """A descriptor on the directory that will hold ``parts[-1]``, made (0700) where missing, never
    through a symlink."""
    fd = os.dup(base_fd)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise BundleError(
                        f"member {name[:200]!r} lies below a symlink or a file; refused", where=where
                    ) from None
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


class _Parents:
    """Descriptors on the directories members go into, kept for the members after (a bundle lists its
    members sorted, so siblings follow each other): a few system calls a member instead of three a
    component. A kept descriptor was opened component by component with ``O_NOFOLLOW`` (as
    :func:`_open_parent` does), and nothing extraction does removes or replaces a directory, so it
    still names the directory at its path."""

    MOST = 64

    def __init__(self, base: dict[str, int]) -> None:
        self.base = base
        self.kept: dict[tuple[str, tuple[str, ...]], int] = {}

    def get(self, area: str, parts: list[str], name: str, where: str) -> int:
        """The directory that will hold ``parts[-1]``; the descriptor stays this object's."""
        parent = tuple(parts[:-1])
        n = len(parent)
        while n and (area, parent[:n]) not in self.kept:  # the deepest directory on the way kept open
            n -= 1
        fd = self.kept[(area, parent[:n])] if n else self.base[area]
        if n == len(parent):
            return fd
        fd = _open_parent(fd, [*parent[n:], parts[-1]], name, where)
        self.kept[(area, parent)] = fd
        if len(self.kept) > self.MOST:
            os.close(self.kept.pop(next(iter(self.kept))))
        return fd

    def close(self) -> None:
        for fd in self.kept.values():
            os.close(fd)
        self.kept.clear()


class _Placeholders:
    """Empty placeholders as hard links to one empty file of the extraction directory (a new one when
    the file system's link count limit is met)."""

    def __init__(self, directory: Path) -> None:
        self.fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.made = 0
        self.source = self._new()

    def _new(self) -> str:
        self.made += 1
        name = f"placeholder.{self.made}"
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=self.fd))
        return name

    def make(self, fd: int, leaf: str, name: str, where: str) -> None:
        for _ in range(2):
            try:
                os.link(self.source, leaf, src_dir_fd=self.fd, dst_dir_fd=fd, follow_symlinks=False)
                return
            except FileExistsError:
                raise BundleError(f"member {name[:200]!r} appears twice; refused", where=where) from None
            except OSError as exc:
                if exc.errno != errno.EMLINK:
                    raise
                self.source = self._new()
        raise BundleError(f"{name[:200]!r}: cannot make a placeholder", where=where)

    def close(self) -> None:
        os.close(self.fd)


def _image_path(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def _write_file(fd: int, leaf: str, source: IO[bytes] | None, size: int, name: str, where: str) -> None:
    try:
        out = os.open(
            leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd
        )
    except FileExistsError:
        raise BundleError(f"member {name[:200]!r} appears twice; refused", where=where) from None
    try:
        left = size
        while source is not None and left > 0:
            chunk = source.read(min(left, 1 << 20))
            if not chunk:
                break
            os.write(out, chunk)
            left -= len(chunk)
    finally:
        os.close(out)


def extract(bundle: Path, caps: Caps = Caps()) -> Extracted:
    """Unpack ``bundle`` (tar or tar.gz) into a new private temporary directory."""
    where = str(bundle)
    directory = Path(tempfile.mkdtemp(prefix="imagelint-bundle-"))
    result = Extracted(directory, directory / "root", directory / "meta")
    try:
        _extract_into(bundle, result, caps, where)
    except BaseException:
        result.cleanup()
        raise
    return result


def _extract_into(bundle: Path, result: Extracted, caps: Caps, where: str) -> None:
    result.root.mkdir(0o700)
    result.meta.mkdir(0o700)
    try:
        raw = open(bundle, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise BundleError(f"cannot read the bundle: {exc.strerror}", where=where) from None
    fds = {
        "root": os.open(result.root, os.O_RDONLY | os.O_DIRECTORY),
        "meta": os.open(result.meta, os.O_RDONLY | os.O_DIRECTORY),
    }
    parents = _Parents(fds)
    placeholders = _Placeholders(result.directory)
    try:
        magic = raw.read(2)
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        counted = _Counted(stream, caps.stream, where)
        seen: set[str] = set()
        members = total = 0
        try:
            bounded = _HeaderBudget().tarinfo()
            with tarfile.open(fileobj=counted, mode="r|", tarinfo=bounded) as tar:  # type: ignore[call-overload]
                for member in tar:
                    tar.members.clear()  # a stream is read once: keep no list of every member read
                    members += 1
                    if members > caps.members:
                        raise BundleError(f"more than {caps.members:,} members; refused", where=where)
                    area, parts = _parts(member.name, where)
                    # the image part's names are the table's keys; only the records' need a set
                    key = _image_path(parts)
                    if key in (result.table if area == "root" else seen):
                        raise BundleError(f"member {member.name[:200]!r} appears twice; refused", where=where)
                    if area == "meta":
                        seen.add(key)
                    total += _member(tar, member, area, parts, parents, result, caps, where)
                    if total > caps.total:
                        raise BundleError(f"more than {caps.total:,} bytes of content; refused", where=where)
        except _HeaderRefused as exc:
            raise BundleError(str(exc), where=where) from None
        except (tarfile.TarError, EOFError, OSError, ValueError, zlib_error()) as exc:
            # tarfile lets a ValueError out of some malformed numeric fields
            raise BundleError(f"not a readable tar archive: {str(exc)[:200]!r}", where=where) from None
        _check_members(result, where)
        manifest_path = result.meta / "manifest.txt"
        if not manifest_path.is_file():
            raise BundleError(
                "no imagelint/manifest.txt: not a bundle made by the imagelint collector", where=where
            )

        def described(path: str, st: ImageStat, reason: str) -> None:
            parts = [p for p in path.split("/") if p]
            if path in result.table or not parts:
                raise BundleError(f"{path}: described twice; refused", where=where)
            placeholders.make(parents.get("root", parts, path, where), parts[-1], path, where)
            result.table[path] = st
            result.missing[path] = reason

        # a described entry is a placeholder in the tree: it counts against the members cap
        result.manifest = read_manifest(manifest_path, described, most=caps.members - members + OWN_LINES)
    finally:
        parents.close()
        placeholders.close()
        for fd in fds.values():
            os.close(fd)
        raw.close()


def _check_members(result: Extracted, where: str) -> None:
    """The image members are the ones the collector listed in ``imagelint/members.txt``, or the
    bundle is damaged: a tar header's checksum is a byte sum, which two flipped bits can leave
    unchanged, and a renamed member would read as a file absent from the image. A bundle without
    the list (an older collector) is read as before."""
    listed_path = result.meta / "members.txt"
    if not listed_path.is_file():
        return
    names = listed_path.read_bytes().decode("utf-8", "surrogateescape").split("\n")
    listed = {_image_path([p for p in n[1:].split("/") if p not in ("", ".")]) for n in names if n}
    arrived = set(result.table)
    odd = [(p, "is missing") for p in sorted(listed - arrived)] + [
        (p, "is not listed") for p in sorted(arrived - listed)
    ]
    if odd:
        name, what = odd[0]
        why = "the collector's imagelint/members.txt and the tar disagree"
        raise BundleError(f"damaged: {name[:200]!r} {what} ({why})", where=where)


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


def _member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    area: str,
    parts: list[str],
    parents: _Parents,
    result: Extracted,
    caps: Caps,
    where: str,
) -> int:
    """Create one checked member; returns the bytes of content written."""
    name = member.name
    kind: FileKind
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        kind = FileKind.FILE
        limit = caps.file if area == "root" else META_FILE_CAP
        if member.size > limit:
            raise BundleError(
                f"member {name[:200]!r} is {member.size:,} bytes, over {limit:,}; refused", where=where
            )
    elif member.type == tarfile.DIRTYPE:
        kind = FileKind.DIR
    elif member.type == tarfile.SYMTYPE and area == "root":
        kind = FileKind.SYMLINK
        if "\0" in member.linkname or len(member.linkname) > MAX_NAME or not parts:
            raise BundleError(f"symlink {name[:200]!r}: bad target; refused", where=where)
    else:
        what = {
            tarfile.LNKTYPE: "a hard link",
            tarfile.CHRTYPE: "a character device",
            tarfile.BLKTYPE: "a block device",
            tarfile.FIFOTYPE: "a FIFO",
            tarfile.SYMTYPE: "a symlink outside the image part",
        }.get(member.type, f"of tar type {member.type!r}")
        raise BundleError(f"member {name[:200]!r} is {what}; refused", where=where)
    if area == "root":
        path = _image_path(parts)
        # a tar symlink's size field is 0; lstat gives a link the length of its target
        size = (
            member.size
            if kind is FileKind.FILE
            else len(os.fsencode(member.linkname))
            if kind is FileKind.SYMLINK
            else 0
        )
        result.table[path] = ImageStat(
            path, kind, stat_mod.S_IMODE(member.mode), member.uid, member.gid, size
        )
    if not parts:  # the root directory itself
        return 0
    fd = parents.get(area, parts, name, where)
    leaf = parts[-1]
    if kind is FileKind.DIR:
        try:
            os.mkdir(leaf, 0o700, dir_fd=fd)
        except FileExistsError:
            st = os.lstat(leaf, dir_fd=fd)
            if not stat_mod.S_ISDIR(st.st_mode):
                raise BundleError(f"member {name[:200]!r} appears twice; refused", where=where) from None
        return 0
    if kind is FileKind.SYMLINK:
        try:
            os.symlink(member.linkname, leaf, dir_fd=fd)
        except FileExistsError:
            raise BundleError(f"member {name[:200]!r} appears twice; refused", where=where) from None
        return 0
    _write_file(fd, leaf, tar.extractfile(member), member.size, name, where)
    return member.size
