"""Where journal files come from: an image, a directory, or single files.

* ``open_image(target)``: the persistent journal ``/var/log/journal`` and the volatile
  ``/run/log/journal`` of a mounted image, each with its files directly inside and one directory
  level down (``<machine-id>/``, ``remote/``), opened through ``the target's ``open_random```` so links
  resolve inside the image and special files are refused.
* ``open_directory(path)`` (what ``journalctl --directory`` reads) and ``open_files(paths)`` on the
  host.

A file name counts when it ends in ``.journal`` or ``.journal~`` (journald's name for a file it
found corrupt or dirty and set aside). Every such file gets a ``FileReport`` whether or not it can be
opened; the returned ``Journal`` reads the ones that could be.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from typing import NamedTuple

from imagelint.errors import ImageReadError, TargetError
from imagelint.facts.journal.errors import JournalError, UnsupportedJournal
from imagelint.facts.journal.journal import Journal
from imagelint.facts.journal.scan import FileReport, FileStatus, JournalScan

TYPE_CHECKING = False
if TYPE_CHECKING:  # kept off the import path: a host directory needs neither (importing costs ms)
    from imagelint.facts.journal.console import ConsoleLog
    from imagelint.facts.journal.reader import JournalFile
    from imagelint.targets.interface import RandomAccessFile, Target

IMAGE_JOURNAL_DIRS = ("/var/log/journal", "/run/log/journal")


class JournalRequest(NamedTuple):
    """Where a run reads the journal (a host directory or file, a console's kernel lines; neither: the
    target's own journal), and whether having no journal at all is an error rather than "not
    applicable"."""

    path: str | None = None
    required: bool = False
    console: ConsoleLog | None = None  # a machine's serial console, read as a journal (``console``)


def is_journal_name(name: str) -> bool:
    return name.endswith(".journal") or name.endswith(".journal~")


def _open_one(path: str, opener: Callable[[], RandomAccessFile]) -> tuple[FileReport, JournalFile | None]:
    from imagelint.facts.journal.reader import JournalFile  # here: an image without a journal file needs none

    report = FileReport(path)
    try:
        f = opener()
        report.size = f.size
        jf = JournalFile.from_random(f, path)
    except ImageReadError as exc:
        report.problem(f"cannot open: {exc.reason}", fatal=True)
        return report, None
    except OSError as exc:
        report.problem(f"cannot open: {exc.strerror or exc}", fatal=True)
        return report, None
    except UnsupportedJournal as exc:
        report.problem(f"unsupported: {exc}", fatal=True)
        return report, None
    except JournalError as exc:
        report.problem(str(exc), fatal=True)
        return report, None
    h = jf.header
    report.state = h.state_name
    report.flags = tuple(h.flag_names())
    report.writer = h.writer_generation
    report.n_entries = h.n_entries
    if jf.truncated:
        report.problem(
            f"truncated: the file is {jf.file_size} bytes but its header describes "
            f"{h.header_size + h.arena_size}; entries past the end are lost"
        )
    return report, jf


def _build(
    source: str, candidates: Iterable[tuple[str, Callable[[], RandomAccessFile]]], scan: JournalScan
) -> Journal:
    opened: list[tuple[FileReport, JournalFile]] = []
    for path, opener in candidates:
        report, jf = _open_one(path, opener)
        scan.files.append(report)
        if jf is not None:
            opened.append((report, jf))
    if not scan.source:
        scan.source = source
    return Journal(opened, scan)


def open_files(paths: Iterable[str | os.PathLike[str]]) -> Journal:
    """Host journal files, read as one interleaved journal."""
    names = [os.fspath(p) for p in paths]
    scan = JournalScan(source=", ".join(names))
    return _build(scan.source, ((p, _host_opener(p)) for p in names), scan)


def _host_opener(path: str) -> Callable[[], RandomAccessFile]:
    def opener() -> RandomAccessFile:
        from imagelint.targets.rootfs import HostFile

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise OSError(0, "not a regular file; not opened")
        return HostFile(fd)

    return opener


def _host_journal_files(directory: str) -> list[str]:
    """Journal files in a host directory and one level down, listed through a directory target
    rooted there (links resolve inside it, listings do not touch access times)."""
    from imagelint.targets.rootfs import RootfsTarget

    try:
        target = RootfsTarget(directory)
        return [directory.rstrip("/") + p for p in image_journal_files(target, ["/"])[1]]
    except (TargetError, ImageReadError):
        return []


def host_journal_files(directory: str | os.PathLike[str]) -> list[str]:
    """The journal file paths ``open_directory`` would read: in ``directory`` and one level down, sorted."""
    return _host_journal_files(_as_str(directory))


def open_directory(directory: str | os.PathLike[str]) -> Journal:
    """The journal files in a host directory and its immediate subdirectories."""
    d = _as_str(directory)
    scan = JournalScan(source=d, searched=[d], existing=[d] if os.path.isdir(d) else [])
    return _build(d, ((p, _host_opener(p)) for p in _host_journal_files(d)), scan)


def _as_str(path: str | os.PathLike[str]) -> str:
    """What ``str(Path(path))`` gives (the spelling reports show), without importing ``pathlib``."""
    s = os.fspath(path)
    root = "//" if s.startswith("//") and not s.startswith("///") else "/" if s.startswith("/") else ""
    return root + "/".join(p for p in s.split("/") if p and p != ".") or "."


def open_path(path: str | os.PathLike[str]) -> Journal:
    """A host directory (as ``open_directory``) or a single journal file."""
    return open_directory(path) if os.path.isdir(path) else open_files([path])


def image_journal_files(
    target: Target, dirs: Iterable[str] = IMAGE_JOURNAL_DIRS
) -> tuple[list[str], list[str]]:
    """(existing journal directories, journal file paths) inside an image."""
    from imagelint.targets.interface import FileKind

    existing: list[str] = []
    files: list[str] = []
    for top in dirs:
        st = target.stat(top)
        if st is None or st.kind is not FileKind.DIR:
            continue
        existing.append(top)
        for name in target.listdir(top):
            path = f"{top.rstrip('/')}/{name}"
            kind = target.stat(path)
            if kind is None:
                continue
            if kind.kind is FileKind.DIR:
                files += [f"{path}/{n}" for n in target.listdir(path) if is_journal_name(n)]
            elif is_journal_name(name):
                files.append(path)
    return existing, files


def open_image(target: Target, dirs: Iterable[str] = IMAGE_JOURNAL_DIRS) -> Journal:
    """The journal kept inside a mounted image (persistent and volatile locations)."""
    dirs = list(dirs)
    existing, files = image_journal_files(target, dirs)
    scan = JournalScan(source=target.description, searched=dirs, existing=existing)
    return _build(target.description, ((p, _image_opener(target, p)) for p in files), scan)


def _image_opener(target: Target, path: str) -> Callable[[], RandomAccessFile]:
    return lambda: target.open_random(path)


__all__ = [
    "IMAGE_JOURNAL_DIRS",
    "FileStatus",
    "image_journal_files",
    "is_journal_name",
    "open_directory",
    "open_files",
    "open_image",
    "open_path",
]
