"""Reading the image for the systemd fact layer: directory listings with file kinds, and files read once.

Everything goes through the :class:`~imagelint.targets.Target`, so links resolve inside the image.
Listings are cached for the lifetime of one index build, parsed files only for a short while (the enablement
lookup and the unit load of one name read the same files back to back); read failures become
problems. A directory of more than ``MAX_DIR_ENTRIES`` entries is not indexed at all: listing it
raises :class:`DirectoryTooLargeError` (an ImageReadError: the run is inconclusive) instead of
growing without bound.
"""

from __future__ import annotations

from collections import OrderedDict

from imagelint.errors import ImageReadError
from imagelint.facts.systemd.model import ParsedFile, Problem
from imagelint.facts.systemd.parser import parse_unit_bytes
from imagelint.targets.interface import FileKind, Target

MAX_DIR_ENTRIES = 100_000  # per directory; 50x a large real image's unit directory
PARSE_CACHE_SIZE = 256  # parsed files kept (most recently used); any older one is parsed again


class DirectoryTooLargeError(ImageReadError):
    """A unit directory with more entries than imagelint indexes (an image cannot be judged then)."""


def join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


class ImageTree:
    """Cached directory listings (name -> kind) and parsed unit files of one image.

    Listings come from the target's ``list_kinds`` on a directory resolved inside the image (a
    directory target reads it without touching access times); entry kinds come from the directory
    entry itself (a link is reported as a link, never followed). File contents are only ever read
    through the target's ``read_bytes``.
    """

    def __init__(self, target: Target, *, max_entries: int | None = None) -> None:
        self.target = target
        self.max_entries = MAX_DIR_ENTRIES if max_entries is None else max_entries
        self._listings: dict[str, dict[str, FileKind] | None] = {}
        self._resolved: dict[str, str] = {}
        self._parsed: OrderedDict[str, ParsedFile | Problem] = OrderedDict()
        self.problems: list[Problem] = []

    def entries(self, directory: str) -> dict[str, FileKind] | None:
        """Entries of a directory (the directory itself may be reached through links); None if absent.

        Raises DirectoryTooLargeError for a directory of more than ``max_entries`` entries.
        """
        if directory in self._listings:
            return self._listings[directory]
        head, _, name = directory.rpartition("/")
        head = head or "/"
        resolved: str | None = None  # the directory's canonical path, when its parent's listing gives it
        if name and head in self._listings:
            parent = self._listings[head]
            kind = None if parent is None else parent.get(name)
            if kind is None or kind not in (FileKind.DIR, FileKind.SYMLINK):
                # Answered by the parent's listing: not cached, as most names asked about (NAME.d,
                # NAME.wants... of every unit) do not exist and would fill the cache.
                return None
            if kind is FileKind.DIR:
                resolved = join(self._resolved[head], name)
        listing: dict[str, FileKind] | None = None
        too_many = False
        try:
            # the target's own listing (a directory target opens it with O_NOATIME: times stay as they were)
            listing = self.target.list_kinds(
                directory if resolved is None else resolved, limit=self.max_entries
            )
            if listing is not None:
                too_many = len(listing) > self.max_entries
                self._resolved[directory] = self.target.resolve(directory) if resolved is None else resolved
        except ImageReadError as exc:
            self.problems.append(Problem(directory, None, f"directory not read: {exc.reason}"))
        if too_many:
            raise DirectoryTooLargeError(
                directory, f"more than {self.max_entries:,} entries: too large to index; not judged"
            )
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
        """Read and parse one unit file or drop-in (links followed inside the image).

        The last ``PARSE_CACHE_SIZE`` results are kept, so the same file asked for again soon is
        read once; the raw bytes are never kept."""
        cached = self._parsed.get(path)
        if cached is not None:
            self._parsed.move_to_end(path)
            return cached
        result: ParsedFile | Problem
        try:
            result = parse_unit_bytes(self.target.read_bytes(path), path)
        except ImageReadError as exc:
            result = Problem(path, None, f"not read: {exc.reason}")
        self._parsed[path] = result
        if len(self._parsed) > PARSE_CACHE_SIZE:
            self._parsed.popitem(last=False)
        return result


def conf_files(
    target: Target, dirs: tuple[str, ...] | list[str], suffix: str
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
