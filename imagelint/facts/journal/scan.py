"""The account of what was read: files found, read, read in part, skipped (and why), entries examined.

The rule layer turns this into a verdict: any file that is present but was not read completely
(``FileStatus.SKIPPED`` or ``FileStatus.PARTIAL``) makes journal rules *inconclusive*, never a pass;
no journal file at all makes them *not applicable*. Nothing here decides that; it only records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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
    entries_examined: int = 0

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
            "files": [f.to_dict() for f in self.files],
        }
