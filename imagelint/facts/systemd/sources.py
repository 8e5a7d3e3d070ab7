"""Reading the image for the systemd fact layer: directory listings with file kinds, and files read once.

Everything goes through :class:`RootfsTarget`, so links resolve inside the image. Listings and
parsed files are cached for the lifetime of one index build; read failures become problems.
"""

from __future__ import annotations

import os
from typing import Any

from imagelint.errors import ImageReadError
from imagelint.facts.systemd.model import ParsedFile, Problem
from imagelint.facts.systemd.parser import parse_unit_bytes
from imagelint.targets.rootfs import FileKind, ImageStat, RootfsTarget


def join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


class ImageTree:
    """Cached directory listings (name -> kind) and parsed unit files of one image.

    Listings come from ``os.scandir`` on a directory the target has resolved inside the image;
    entry kinds come from the directory entry itself (a link is reported as a link, never
    followed). File contents are only ever read through ``RootfsTarget.read_bytes``.
    """

    def __init__(self, target: RootfsTarget) -> None:
        self.target = target
        self._listings: dict[str, dict[str, FileKind] | None] = {}
        self._host_dirs: dict[str, str] = {}
        self._parsed: dict[str, ParsedFile | Problem] = {}
        self.problems: list[Problem] = []

    def entries(self, directory: str) -> dict[str, FileKind] | None:
        """Entries of a directory (the directory itself may be reached through links); None if absent."""
        if directory in self._listings:
            return self._listings[directory]
        head, _, name = directory.rpartition("/")
        head = head or "/"
        host: str | None = None
        parent = self._listings.get(head, _MISSING) if name else _MISSING
        if parent is not _MISSING:
            kind = None if parent is None else parent.get(name)
            if kind is None or kind not in (FileKind.DIR, FileKind.SYMLINK):
                self._listings[directory] = None
                return None
            if kind is FileKind.DIR:
                host = os.path.join(self._host_dirs[head], name)
        listing: dict[str, FileKind] | None = None
        try:
            if host is None:
                host = str(self.target.host_path(self.target.resolve(directory)))
            with os.scandir(host) as it:
                listing = {e.name: _entry_kind(e) for e in it}
            self._host_dirs[directory] = host
        except (FileNotFoundError, NotADirectoryError):
            listing = None
        except ImageReadError as exc:
            self.problems.append(Problem(directory, None, f"directory not read: {exc.reason}"))
        except OSError as exc:
            self.problems.append(Problem(directory, None, f"directory not read: {exc.strerror}"))
        self._listings[directory] = listing
        return listing

    def kind(self, path: str) -> FileKind | None:
        """The kind of ``path`` itself (not following a final link), from the cached parent listing."""
        head, _, name = path.rpartition("/")
        listing = self.entries(head or "/")
        if listing is None:
            return None
        return listing.get(name)

    def kind_follow(self, path: str) -> FileKind | None:
        """The kind of what ``path`` leads to inside the image; raises ImageReadError on a loop."""
        kind = self.kind(path)
        if kind is FileKind.SYMLINK:
            st = self.target.stat(path)
            return None if st is None else st.kind
        return kind

    def parse(self, path: str) -> ParsedFile | Problem:
        """Read and parse one unit file or drop-in (links followed inside the image), once per build."""
        cached = self._parsed.get(path)
        if cached is not None:
            return cached
        result: ParsedFile | Problem
        try:
            result = parse_unit_bytes(self.target.read_bytes(path), path)
        except ImageReadError as exc:
            result = Problem(path, None, f"not read: {exc.reason}")
        self._parsed[path] = result
        return result


_MISSING: Any = object()


def _entry_kind(entry: os.DirEntry[str]) -> FileKind:
    if entry.is_symlink():
        return FileKind.SYMLINK
    if entry.is_dir(follow_symlinks=False):
        return FileKind.DIR
    if entry.is_file(follow_symlinks=False):
        return FileKind.FILE
    return ImageStat.from_os(entry.name, entry.stat(follow_symlinks=False)).kind


def conf_files(
    target: RootfsTarget, dirs: tuple[str, ...] | list[str], suffix: str
) -> tuple[list[str], list[Problem]]:
    """systemd's conf_files_list_strv(): ``*SUFFIX`` files and links in ``dirs``, an earlier directory's
    file hiding the same name in later ones, sorted by file name. Hidden (dot) files are skipped."""
    found: dict[str, str] = {}
    problems: list[Problem] = []
    for directory in dirs:
        try:
            st = target.stat(directory)
        except ImageReadError as exc:
            problems.append(Problem(directory, None, f"directory not read: {exc.reason}"))
            continue
        if st is None:
            continue
        if st.kind is not FileKind.DIR:
            problems.append(Problem(directory, None, f"expected a directory but found a {st.kind}; ignored"))
            continue
        for name in target.listdir(directory):
            if name.startswith(".") or not name.endswith(suffix) or name in found:
                continue
            path = join(directory, name)
            entry = target.lstat(path)
            if entry is None or entry.kind not in (FileKind.FILE, FileKind.SYMLINK):
                continue
            found[name] = path
    return [found[name] for name in sorted(found)], problems
