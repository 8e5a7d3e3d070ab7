"""The one place image paths are resolved: a chroot's rules on top of a backend's primitive operations.

A :class:`Backend` only answers questions about *already-resolved* paths, given as a tuple of
components from the image root (``("usr", "lib", "os-release")``): lstat, readlink, list a
directory, open a regular file. :class:`ResolvingTarget` does everything else the same way for
every target:

* an absolute symlink target restarts at the image root, ``..`` at the root stays there, and more
  than ``MAX_SYMLINKS`` links in one lookup is a loop (an ImageReadError), as in the kernel;
* only regular files are opened, after an ``lstat`` says so (a FIFO is never opened), and reads are
  capped (``read_limit``; a larger file is an ImageReadError, never a partial read);
* a glob or walk visits at most ``MAX_WALK_ENTRIES`` entries and ``MAX_WALK_DEPTH`` levels, and
  lists at most ``MAX_DIR_ENTRIES`` entries of one directory (a listing is held whole while it is
  sorted), past which it raises ImageReadError (the run is then inconclusive, never a pass).

Backends raise ``OSError`` for anything but a missing path: the data is there and cannot be read (a
corrupt inode, extent tree or directory block of a disk image; an I/O error). It becomes an
ImageDamageError naming the image path asked for, never an absent or empty file, and the target
keeps an account of it (:meth:`ResolvingTarget.damaged`) so that no damage it met goes unreported.
"""

from __future__ import annotations

import fnmatch
import operator
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol, cast

from imagelint.errors import ImageDamageError, ImageReadError, os_reason
from imagelint.targets.interface import (
    FileKind,
    ImageStat,
    RandomAccessFile,
    TextContent,
    decode_text,
    human_size,
)

MAX_SYMLINKS = 40  # the kernel's limit for one path lookup
DEFAULT_READ_LIMIT = 16 * 1024 * 1024
MAX_CACHED_PREFIXES = 65536  # resolved directory prefixes kept (the cache is cleared when full)
MAX_WALK_ENTRIES = 2_000_000  # entries one glob or walk may visit before the run is inconclusive
MAX_WALK_DEPTH = 2048  # directory levels below the start (PATH_MAX allows ~2048 one-letter levels)
# entries of one directory listed by a glob or walk (~0.5 KiB each while held): /usr/share/doc of a
# large real image has ~3,000, a mail spool or cache directory a few tens of thousands
MAX_DIR_ENTRIES = 200_000
MAX_DAMAGE_KEPT = 100  # damaged paths a target keeps an account of (their count is kept in full)
_CHUNK = 1 << 20

Parts = tuple[str, ...]


class Backend(Protocol):
    """Primitive operations on resolved paths (no link is followed by any of them)."""

    def lstat(self, parts: Parts) -> ImageStat | None:
        """The entry itself; None when it (or a directory on the way) does not exist."""

    def readlink(self, parts: Parts) -> str: ...

    def scan(self, parts: Parts, limit: int, image_dir: str) -> list[tuple[str, ImageStat]] | None:
        """(name, lstat) of up to ``limit + 1`` entries, in any order, as a new list (the resolver sorts
        it in place); None when not a directory. Each lstat is made once, named with its image path
        below ``image_dir`` (see :func:`entry_path`)."""

    def kinds(self, parts: Parts, limit: int) -> dict[str, FileKind] | None:
        """name -> kind of up to ``limit + 1`` entries; None when not a directory."""

    def open(self, parts: Parts) -> RandomAccessFile:
        """A regular file the resolver has already lstat'ed as one (re-checked where the backend can)."""


class _Resolution(NamedTuple):
    """Where resolving a path prefix got to: canonical components, whether one was missing, links used."""

    parts: Parts
    missing: bool
    links: int


class DirectoryHints(Protocol):
    """What a backend may add to :class:`Backend` (optional, found by ``getattr``): read hints."""

    def prefetch_dirs(self, dirs: Sequence[Parts]) -> None:
        """These resolved directories are about to be listed: start reading them if that helps
        (a disk image over a remote disk); never changes what a listing returns."""


def split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _has_magic(part: str) -> bool:
    return any(c in part for c in "*?[")


def _as_path(parts: Parts) -> str:
    return "/" + "/".join(parts)


_by_name = operator.itemgetter(0)  # of a (name, lstat) pair


def entry_path(image_dir: str, name: str) -> str:
    """The image path of the entry ``name`` of the directory ``image_dir``."""
    return f"{image_dir}/{name}" if image_dir != "/" else "/" + name


class ResolvingTarget:
    """A target over a :class:`Backend`: every public method takes an image path and resolves it here."""

    kind = "image"

    def __init__(self, backend: Backend, *, read_limit: int = DEFAULT_READ_LIMIT) -> None:
        self.backend = backend
        self.read_limit = read_limit
        self._prefixes: dict[str, _Resolution] = {}  # resolved directory prefixes, by image path
        self._damaged: dict[tuple[str, str], None] = {}  # (image path, why), first met first
        self._damage_count = 0

    @property
    def description(self) -> str:
        return self.kind

    def facts(self) -> dict[str, object]:
        return {}

    def damaged(self) -> list[tuple[str, str]]:
        """(image path, why) of each read that met damage so far, in order, at most
        ``MAX_DAMAGE_KEPT``; more than that ends with a line saying how many there were."""
        kept = list(self._damaged)
        if self._damage_count > len(kept):
            kept.append(("/", f"{self._damage_count:,} damaged reads in all; the first {len(kept)} listed"))
        return kept

    def _damage(self, image_path: str, what: str, exc: OSError) -> ImageDamageError:
        """The error for a backend's failure to read data that is there, accounted for."""
        error = ImageDamageError(image_path, f"{what}: {os_reason(exc)}")
        key = (image_path, error.reason)
        if key not in self._damaged:
            self._damage_count += 1
            if len(self._damaged) < MAX_DAMAGE_KEPT:
                self._damaged[key] = None
        return error

    # -- path resolution ---------------------------------------------------------------------

    def resolve(self, image_path: str, *, follow_last: bool = True) -> str:
        """Canonical image path of ``image_path`` after following links inside the image.

        Components that do not exist are kept as written; callers find out by ``lstat``.
        Raises ImageReadError on a symlink loop.
        """
        return _as_path(self._resolve(image_path, follow_last=follow_last))

    def _resolve(self, image_path: str, *, follow_last: bool = True) -> Parts:
        parts = split(image_path)
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
        return state.parts

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
            here = (*resolved, name)
            try:
                st = self.backend.lstat(here)
            except OSError as exc:
                raise self._damage(image_path, "cannot look up", exc) from None
            if st is None:
                missing = True
                resolved.append(name)
                continue
            if st.kind is not FileKind.SYMLINK:
                resolved.append(name)
                continue
            links += 1
            if links > MAX_SYMLINKS:
                raise ImageReadError(
                    image_path, f"too many levels of symbolic links (a symlink loop) at {_as_path(here)}"
                )
            try:
                target = self.backend.readlink(here)
            except OSError as exc:
                raise self._damage(image_path, "cannot read link", exc) from None
            if target.startswith("/"):
                resolved = []
            pending.extend(reversed(split(target) if target.strip("/") else []))
        return _Resolution(tuple(resolved), missing=missing, links=links)

    # -- metadata ----------------------------------------------------------------------------

    def lstat(self, image_path: str) -> ImageStat | None:
        """Stat the path itself (a final symlink is not followed); None when it does not exist."""
        return self._stat(image_path, follow_last=False)

    def stat(self, image_path: str) -> ImageStat | None:
        """Stat what the path points to inside the image; None when it does not exist."""
        return self._stat(image_path, follow_last=True)

    def _stat(self, image_path: str, *, follow_last: bool) -> ImageStat | None:
        parts = self._resolve(image_path, follow_last=follow_last)
        try:
            st = self.backend.lstat(parts)
        except OSError as exc:
            raise self._damage(image_path, "cannot stat", exc) from None
        return None if st is None else _named(st, image_path)

    def exists(self, image_path: str) -> bool:
        return self.lstat(image_path) is not None

    def readlink(self, image_path: str) -> str:
        parts = self._resolve(image_path, follow_last=False)
        try:
            return self.backend.readlink(parts)
        except OSError as exc:
            raise self._damage(image_path, "cannot read link", exc) from None

    def listdir(self, image_path: str) -> list[str]:
        """Sorted entry names of a directory; [] when the path is missing or not a directory."""
        entries = self._scan(image_path, self._resolve(image_path))
        return [name for name, _ in entries]

    def list_kinds(self, image_path: str, *, limit: int) -> dict[str, FileKind] | None:
        """name -> kind of a directory's entries, at most ``limit + 1``; None when not a directory."""
        parts = self._resolve(image_path)
        try:
            return self.backend.kinds(parts, limit)
        except OSError as exc:
            raise self._damage(image_path, "cannot list directory", exc) from None

    def _hint_dirs(self, parent: Parts, names: list[str]) -> None:
        """Tell a backend that takes read hints (:class:`DirectoryHints`) which directories of ``parent``
        come next (nothing is built for one that takes none: a walk asks once per directory)."""
        if names and callable(getattr(self.backend, "prefetch_dirs", None)):
            cast(DirectoryHints, self.backend).prefetch_dirs([(*parent, name) for name in names])

    def _scan(self, image_dir: str, parts: Parts) -> list[tuple[str, ImageStat]]:
        """(name, lstat) of each entry of a resolved directory, sorted by name; [] when it is gone."""
        try:
            entries = self.backend.scan(parts, MAX_DIR_ENTRIES, _normal_dir(image_dir))
        except OSError as exc:
            raise self._damage(image_dir, "cannot list directory", exc) from None
        if entries is not None and len(entries) > MAX_DIR_ENTRIES:
            raise ImageReadError(
                image_dir, f"more than {MAX_DIR_ENTRIES:,} entries in one directory; not read in full"
            )
        if entries is None:
            return []
        entries.sort(key=_by_name)
        return entries

    # -- content -----------------------------------------------------------------------------

    def _regular(self, image_path: str) -> tuple[Parts, ImageStat]:
        """The resolved path and lstat of a regular file; anything else is refused before an open."""
        parts = self._resolve(image_path)
        try:
            st = self.backend.lstat(parts)
        except OSError as exc:
            raise self._damage(image_path, "cannot stat", exc) from None
        if st is None:
            raise ImageReadError(image_path, "does not exist")
        if st.kind is not FileKind.FILE:
            raise ImageReadError(image_path, f"is a {st.kind}, not a regular file; not opened")
        return parts, st

    def _open(self, image_path: str, parts: Parts) -> RandomAccessFile:
        try:
            return self.backend.open(parts)
        except OSError as exc:
            raise self._damage(image_path, "cannot open", exc) from None

    def read_bytes(self, image_path: str, *, limit: int | None = None) -> bytes:
        """The content of a regular file, refusing anything else and anything over the cap."""
        limit = self.read_limit if limit is None else limit
        parts, st = self._regular(image_path)
        if st.size > limit:
            raise ImageReadError(
                image_path, f"is {human_size(st.size)}, over the {human_size(limit)} read limit"
            )
        f = self._open(image_path, parts)
        try:
            chunks: list[bytes] = []
            pos, remaining = 0, limit + 1
            while remaining > 0:
                chunk = f.pread(pos, min(remaining, _CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                pos += len(chunk)
                remaining -= len(chunk)
        except OSError as exc:
            raise self._damage(image_path, "cannot read", exc) from None
        finally:
            f.close()
        data = b"".join(chunks)
        if len(data) > limit:  # the file grew after lstat
            raise ImageReadError(image_path, f"is over the {human_size(limit)} read limit")
        return data

    def read_text(self, image_path: str, *, limit: int | None = None) -> TextContent:
        return decode_text(self.read_bytes(image_path, limit=limit))

    def open_random(self, image_path: str) -> RandomAccessFile:
        """Open a regular file for positioned reads with no size cap (for large files such as journals).

        The same refusals as ``read_bytes`` apply: links resolve inside the image, and anything but
        a regular file is refused before it is opened. The caller closes it.
        """
        return self._open(image_path, self._regular(image_path)[0])

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
        stack: list[tuple[Parts, Parts, int]] = [((), tuple(split(pattern)), 0)]
        while stack:
            prefix, parts, depth = stack.pop()
            if not parts:
                path = _as_path(prefix)
                if self.lstat(path) is not None:
                    matches.add(path)
                continue
            head, rest = parts[0], parts[1:]
            if head == "**":
                stack.append((prefix, rest, depth))
                budget.descend(depth + 1, _as_path(prefix))
                for name, st in self._entries(prefix, budget):
                    if st.kind is FileKind.DIR:
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

    def _entries(self, prefix: Parts, budget: _Budget) -> list[tuple[str, ImageStat]]:
        image_dir = _as_path(prefix)
        entries = self._scan(image_dir, self._resolve(image_dir))
        budget.spend(len(entries))
        return entries

    def walk(self, top: str) -> Iterator[ImageStat]:
        """Every entry below ``top`` (not ``top`` itself), depth first, never following links.

        Bounded like :meth:`glob`: past ``MAX_WALK_ENTRIES`` entries or ``MAX_WALK_DEPTH`` levels
        it raises ImageReadError.
        """
        budget = _Budget(top)
        # One level per directory on the way down: its path, its resolved parts and the names of its
        # subdirectories not yet visited. A level holds names, not the subdirectories' paths: a
        # directory cycle makes paths thousands of components long, and a wide one would otherwise
        # hold one such path per subdirectory per level.
        levels: list[tuple[str, Parts, Iterator[str]]] = []
        image_dir, resolved = _normal_dir(top), self._resolve(top)
        directory = FileKind.DIR
        while True:
            budget.descend(len(levels), image_dir)
            entries = self._scan(image_dir, resolved)
            budget.spend(len(entries))
            subdirs = []
            for name, st in entries:  # named by the backend: no copy per entry
                yield st
                if st.kind is directory:
                    subdirs.append(name)
            del entries
            self._hint_dirs(resolved, subdirs)  # listed next, depth first
            levels.append((image_dir, resolved, iter(subdirs)))
            while levels:
                parent_dir, parent, names = levels[-1]
                following = next(names, None)
                if following is not None:
                    image_dir, resolved = entry_path(parent_dir, following), (*parent, following)
                    break
                levels.pop()
            else:
                return


def _named(st: ImageStat, path: str) -> ImageStat:
    """``st`` under the image path it was asked by (the backend names it by the resolved one)."""
    return st if st.path == path else st._replace(path=path)


def _normal_dir(image_dir: str) -> str:
    """``image_dir`` without trailing slashes (``/`` stays ``/``), as :func:`entry_path` joins it."""
    return image_dir.rstrip("/") or "/"


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
