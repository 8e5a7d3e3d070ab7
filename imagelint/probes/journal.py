"""Following the host's live journal directory (``imagelint watch``): each new entry handed over exactly once.

``JournalFollower(directory).poll()`` returns the entries appended since the previous poll, with the
fields asked for. It lists the directory, opens the files journald is writing and hands them to the
journal file reader of :mod:`imagelint.facts.journal` (the one every offline read goes through). How
each entry is counted exactly once:

- **Identity is the file, not its name.** Every journal file header carries a random 128-bit
  ``file_id``. Positions are kept per ``file_id``, so when journald rotates (renames the active
  ``system.journal`` to ``system@<seqnum id>-<head seqnum>-<head time>.journal``, marks it
  archived, and starts a new ``system.journal``) the renamed file keeps its position and its last
  entries are still read from it; the new file has a new ``file_id`` and is read from its first
  entry. A file seen under two names in one poll (a hard link, a copy) is read once.
- **The position is where the global entry-array chain was left** (the array object and how many of
  its items were consumed, plus the last entry offset, which the next must exceed), so a poll walks
  only what was appended: no entry is decoded twice and no earlier array is read again. journald
  links an entry into the arrays (and bumps ``n_entries`` in the header) only after the entry
  object is written, so a linked entry is complete.
- **Cheap when idle**: each poll lists the directory (and one level down, as ``journalctl
  --directory`` does) and reads each file's header (4 KiB); a file is opened for reading (positioned
  reads through a page cache, never a mapping: see :mod:`imagelint.facts.journal.reader`) only when
  its ``n_entries`` moved or it is new, and closed again at the end of the poll.
- **Start**: files present at the first poll are followed from their end (``from_start=False``, the
  default: a counter counts what happened while watching), or from their beginning. A file that
  appears later is new: it is read from its first entry.
- **Damage**: an entry-array walk that fails leaves the position where it was (nothing from that walk
  is handed over) and is retried at the next poll; after ``MAX_FAILURES`` consecutive failures the
  file is given up (``FollowStats.abandoned``) rather than failing every poll. An entry that cannot be
  decoded is skipped and counted in ``FollowStats.bad_entries``. A file that vanishes is forgotten
  (journald vacuumed it). A file that cannot be opened or has no valid header is listed in
  ``FollowStats.unreadable`` at each poll until it can be read.
- **Shrinking**: journald only ever appends to a file, so a file (an inode) smaller than it was seen
  before, or one that comes up short while it is walked (``FileShrank``), has been cut under us. It is
  listed in ``FollowStats.shrunk`` at each poll until it is back to at least the size seen; its
  position is kept and nothing from a walk cut short is handed over, so when the file is whole again
  it is followed on from where it was, each entry still counted once. (A mapping would have died of
  SIGBUS instead.)
- **Bounded**: at most ``max_entries`` are handed over per poll; the rest wait for the next one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from dataclasses import field

from imagelint.facts.journal.errors import FileShrank, JournalError
from imagelint.facts.journal.format import parse_header
from imagelint.facts.journal.reader import FieldValue, JournalFile
from imagelint.facts.journal.sources import host_journal_files
from imagelint.records import dataclass
from imagelint.targets.rootfs import HostFile

HEADER_READ = 4096
MAX_FAILURES = 3
DEFAULT_MAX_ENTRIES = 50_000


@dataclass(frozen=True)
class FollowedEntry:
    """One new entry: which file it came from, its boot, realtime (µs) and the fields asked for."""

    path: str
    boot_id: str
    realtime_usec: int
    fields: dict[str, FieldValue]


@dataclass
class _Position:
    path: str
    array_off: int = 0
    index: int = 0
    last_entry: int = 0
    walked: int = 0  # entries walked past in this file (the header's n_entries counts them all)
    failures: int = 0
    abandoned: str | None = None


@dataclass
class FollowStats:
    """What following has met so far (cumulative over the follower's life)."""

    entries: int = 0
    bad_entries: int = 0
    walk_failures: int = 0
    abandoned: dict[str, str] = field(default_factory=dict)  # path → why it is no longer followed
    files: int = 0  # files followed at the last poll
    unreadable: dict[str, str] = field(default_factory=dict)  # at the last poll: path → why not opened
    shrunk: dict[str, str] = field(default_factory=dict)  # at the last poll: path → how it was cut


class JournalUnavailable(Exception):
    """The directory cannot be listed (missing, or not readable): the journal source is down."""


class JournalFollower:
    """Follows the journal files in ``directory`` (see the module docstring)."""

    def __init__(
        self,
        directory: str,
        fields: Collection[str],
        *,
        from_start: bool = False,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self.directory = directory
        self.fields = frozenset(fields)
        self.from_start = from_start
        self.max_entries = max_entries
        self.stats = FollowStats()
        self._positions: dict[bytes, _Position] = {}
        # (st_dev, st_ino) → (the largest size seen, the file id its header gave then)
        self._inodes: dict[tuple[int, int], tuple[int, bytes | None]] = {}
        self._first_poll = True

    def _check_directory(self) -> None:
        try:
            st = os.stat(self.directory)
        except OSError as exc:
            raise JournalUnavailable(f"{self.directory}: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise JournalUnavailable(f"{self.directory}: not a directory")
        if not os.access(self.directory, os.R_OK | os.X_OK):
            raise JournalUnavailable(f"{self.directory}: permission denied")

    def poll(self) -> list[FollowedEntry]:
        """The entries appended since the last poll, oldest file first; raises ``JournalUnavailable``."""
        self._check_directory()
        out: list[FollowedEntry] = []
        seen: set[bytes] = set()
        inodes: set[tuple[int, int]] = set()
        self.stats.unreadable = {}
        self.stats.shrunk = {}
        skip_existing = self._first_poll and not self.from_start
        for path in host_journal_files(self.directory):
            if len(out) >= self.max_entries:
                break
            self._follow_file(path, seen, inodes, out, skip_existing)
        for inode in [i for i in self._inodes if i not in inodes]:
            del self._inodes[inode]
        for file_id in [f for f in self._positions if f not in seen]:
            del self._positions[file_id]  # vacuumed, or renamed out of the directory
        self.stats.files = len(seen)
        self._first_poll = False
        return out

    def _follow_file(
        self,
        path: str,
        seen: set[bytes],
        inodes: set[tuple[int, int]],
        out: list[FollowedEntry],
        skip_existing: bool,
    ) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return  # gone since the listing (rotated away: seen under its new name next time)
        except OSError as exc:
            self.stats.unreadable[path] = exc.strerror or str(exc)
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            inode = (st.st_dev, st.st_ino)
            inodes.add(inode)
            try:
                header = parse_header(os.pread(fd, HEADER_READ, 0), st.st_size)
                unreadable = None
            except (JournalError, OSError) as exc:
                header, unreadable = None, str(exc)
            largest, known_id = self._inodes.get(inode, (0, None))
            # the same file, smaller: not a freed inode number given to a new file (another file id)
            if st.st_size < largest and (header is None or header.file_id == known_id):
                self.stats.shrunk[path] = f"the file shrank from {largest} to {st.st_size} bytes"
                if known_id is not None:
                    seen.add(known_id)  # its position is kept for when it is whole again
                return
            if header is None:
                # not a journal, or not yet one (a file being created has no complete header)
                self.stats.unreadable[path] = unreadable or "no header"
                return
            if header.file_id in seen:
                return
            seen.add(header.file_id)
            self._inodes[inode] = (
                max(st.st_size, largest if known_id == header.file_id else 0),
                header.file_id,
            )
            pos = self._positions.get(header.file_id)
            if pos is None:
                pos = self._positions[header.file_id] = _Position(path)
            pos.path = path
            if pos.abandoned or header.n_entries <= pos.walked:
                return
            try:
                jf = JournalFile.from_random(HostFile(os.dup(fd)), path)
            except (JournalError, OSError) as exc:
                self._failed(pos, str(exc))
                return
            try:
                self._walk(jf, pos, out, skip_existing)
            except FileShrank:
                now = os.fstat(fd).st_size
                self.stats.shrunk[path] = f"the file shrank from {st.st_size} to {now} bytes"
            finally:
                jf.close()
        finally:
            os.close(fd)

    def _walk(self, jf: JournalFile, pos: _Position, out: list[FollowedEntry], skip_existing: bool) -> None:
        """Hand over what was linked since ``pos`` and move it on; a walk the file's shrinking cuts
        short hands over nothing, leaves ``pos`` where it was and raises ``FileShrank``."""
        budget = self.max_entries - len(out)
        if skip_existing:
            budget = 1 << 62  # positioned at the end: offsets only, nothing decoded
        new: list[FollowedEntry] = []
        bad = 0
        try:
            offsets, array_off, index = jf.follow_offsets(pos.array_off, pos.index, pos.last_entry, budget)
            for off in [] if skip_existing else offsets:
                try:
                    boot, realtime, fields = jf.fields_at(off, self.fields)
                except FileShrank:
                    raise
                except JournalError:
                    bad += 1
                    continue
                new.append(FollowedEntry(pos.path, boot, realtime, fields))
        except FileShrank:
            raise  # the caller says how far it shrank
        except JournalError as exc:
            self._failed(pos, str(exc))
            return
        pos.failures = 0
        if array_off:
            pos.array_off, pos.index = array_off, index
        if offsets:
            pos.last_entry = offsets[-1]
            pos.walked += len(offsets)
        out.extend(new)
        self.stats.entries += len(new)
        self.stats.bad_entries += bad

    def _failed(self, pos: _Position, reason: str) -> None:
        pos.failures += 1
        self.stats.walk_failures += 1
        if pos.failures >= MAX_FAILURES:
            pos.abandoned = reason
            self.stats.abandoned[pos.path] = reason
