"""The account of what was read: files found, read, read in part, skipped (and why), entries examined.

The rule layer turns this into a verdict: any file that is present but was not read completely
(``FileStatus.SKIPPED`` or ``FileStatus.PARTIAL``) makes journal rules *inconclusive*, never a pass;
no journal file at all makes them *not applicable*. Nothing here decides that; it only records.

*Entries examined* are the distinct entries whose fields some analysis decoded, however it reached
them: *by index* (a lookup of field values, as the restart analysis and the signal counters do) or
*by scan* (reading every entry in turn). An entry decoded both ways counts once, as scanned, so
``by_index + by_scan == entries_examined``; an entry decoded by several analyses also counts once.
Entries are told apart by their offset in the file, kept in one bit per 8-byte slot (entries are
8-byte aligned), which costs 1/64 of the file's size at most, and only for the ways used.
"""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum

from imagelint.records import dataclass


class FileStatus(StrEnum):
    READ = "read"  # every structure the analysis touched was intact
    PARTIAL = "partial"  # read, but part of it could not be (truncated, corrupt object, broken chain)
    SKIPPED = "skipped"  # nothing read: unsupported feature, zero length, not a journal, unopenable


@dataclass
class FileReport:
    """One journal file and what happened to it."""

    path: str
    size: int | None = None
    status: FileStatus = FileStatus.READ
    reason: str | None = None  # the first problem met, for the report
    problems: int = 0  # how many problems in all (each skipped entry or cut chain counts)
    state: str | None = None  # online / offline / archived, from the header
    flags: tuple[str, ...] = ()
    writer: str | None = None  # writer generation guessed from the header size
    n_entries: int | None = None  # what the header claims
    entries_by_scan: int = 0  # distinct entries decoded by a scan
    entries_by_index: int = 0  # distinct entries decoded after an index lookup, and never by a scan
    _scanned: bytearray = field(default_factory=bytearray, repr=False, compare=False)
    _looked_up: bytearray = field(default_factory=bytearray, repr=False, compare=False)

    @property
    def entries_examined(self) -> int:
        """Distinct entries of this file whose fields were decoded, by index or by scan."""
        return self.entries_by_scan + self.entries_by_index

    def examined(self, offset: int, *, by_scan: bool) -> None:
        """Account for the entry at ``offset`` having been decoded (call it once the decode worked)."""
        slot = offset >> 3
        byte, bit = slot >> 3, 1 << (slot & 7)
        bits = self._scanned if by_scan else self._looked_up
        if byte >= len(bits):
            bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))  # grow by doubling at least
        if bits[byte] & bit:
            return
        bits[byte] |= bit
        if by_scan:
            self.entries_by_scan += 1
            looked_up = self._looked_up
            if byte < len(looked_up) and looked_up[byte] & bit:  # counted by index until now
                self.entries_by_index -= 1
        else:
            scanned = self._scanned
            if not (byte < len(scanned) and scanned[byte] & bit):
                self.entries_by_index += 1

    @property
    def dirty(self) -> bool:
        """Still marked as being written (a snapshot of a running system) or renamed as corrupt."""
        return self.state == "online" or self.path.endswith("~")

    def problem(self, reason: str, *, fatal: bool = False) -> None:
        self.problems += 1
        if self.reason is None:
            self.reason = reason
        if fatal and self.entries_examined == 0 and self.status is not FileStatus.PARTIAL:
            self.status = FileStatus.SKIPPED
        elif self.status is FileStatus.READ:
            self.status = FileStatus.PARTIAL

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "size": self.size,
            "status": str(self.status),
            "reason": self.reason,
            "problems": self.problems,
            "state": self.state,
            "flags": list(self.flags),
            "writer": self.writer,
            "entries_in_header": self.n_entries,
            "entries_examined": self.entries_examined,
            "entries_by_index": self.entries_by_index,
            "entries_by_scan": self.entries_by_scan,
        }


@dataclass
class JournalScan:
    """Every journal file of one source, read or not, and the directories searched."""

    source: str
    searched: list[str] = field(default_factory=list)  # directories looked in
    existing: list[str] = field(default_factory=list)  # … of which these exist
    files: list[FileReport] = field(default_factory=list)

    @property
    def files_found(self) -> int:
        return len(self.files)

    @property
    def files_read(self) -> list[FileReport]:
        return [f for f in self.files if f.status is FileStatus.READ]

    @property
    def files_partial(self) -> list[FileReport]:
        return [f for f in self.files if f.status is FileStatus.PARTIAL]

    @property
    def files_skipped(self) -> list[FileReport]:
        return [f for f in self.files if f.status is FileStatus.SKIPPED]

    @property
    def unreadable(self) -> list[FileReport]:
        """Files present but not read in full: their presence makes journal rules inconclusive."""
        return [f for f in self.files if f.status is not FileStatus.READ]

    @property
    def complete(self) -> bool:
        """At least one file, and every file read without a problem."""
        return bool(self.files) and not self.unreadable

    @property
    def entries_examined(self) -> int:
        return sum(f.entries_examined for f in self.files)

    @property
    def entries_by_index(self) -> int:
        return sum(f.entries_by_index for f in self.files)

    @property
    def entries_by_scan(self) -> int:
        return sum(f.entries_by_scan for f in self.files)

    @property
    def bytes_read(self) -> int:
        """Size of the files read, in full or in part (a skipped file is not read)."""
        return sum(f.size or 0 for f in self.files if f.status is not FileStatus.SKIPPED)

    @property
    def problems(self) -> int:
        return sum(f.problems for f in self.files)

    def note(self) -> str:
        """One line for people, once the analyses have run: what was read and how, and what went wrong.

        e.g. ``1 journal file read (3.0 MiB), 1,234 entries examined (1,200 by index, 34 by scan),
        problems: 0``; files read in part or skipped are named by count, and ``problems`` counts every
        problem met (an unreadable entry, a cut chain, a file that could not be opened).
        """
        from imagelint.targets.rootfs import human_size  # off the import path of a host journal read

        if not self.files:
            where = ", ".join(self.searched) or self.source
            return f"no journal files found in {where}"
        opened = len(self.files) - len(self.files_skipped)
        text = f"{opened:,} journal file{'' if opened == 1 else 's'} read ({human_size(self.bytes_read)})"
        if self.files_partial:
            text += f", {len(self.files_partial):,} of them in part"
        if self.files_skipped:
            text += f", {len(self.files_skipped):,} skipped"
        return (
            f"{text}, {self.entries_examined:,} entries examined ({self.entries_by_index:,} by index, "
            f"{self.entries_by_scan:,} by scan), problems: {self.problems:,}"
        )

    def summary(self) -> str:
        text = (
            f"{self.files_found} journal file(s) found, {len(self.files_read)} read, "
            f"{len(self.files_partial)} read in part, {len(self.files_skipped)} skipped; "
            f"{self.entries_examined} entries examined"
        )
        for f in self.unreadable:
            text += f"\n  {f.status}: {f.path}: {f.reason}"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "searched": self.searched,
            "existing": self.existing,
            "files_found": self.files_found,
            "files_read": len(self.files_read),
            "files_partial": len(self.files_partial),
            "files_skipped": len(self.files_skipped),
            "entries_examined": self.entries_examined,
            "entries_by_index": self.entries_by_index,
            "entries_by_scan": self.entries_by_scan,
            "bytes_read": self.bytes_read,
            "problems": self.problems,
            "files": [f.to_dict() for f in self.files],
        }
