"""Plain data shared by the systemd fact layer: problems, assignments, and parsed files."""

from __future__ import annotations

from dataclasses import field
from typing import Any, NamedTuple

from imagelint.records import dataclass


class Problem(NamedTuple):
    """Something in the image that could not be read or understood, with where it is."""

    path: str
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message}

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class Assignment(NamedTuple):
    """One ``Key=value`` line of a unit file or drop-in (``line`` is where the logical line starts)."""

    section: str
    key: str
    value: str
    path: str
    line: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "key": self.key,
            "value": self.value,
            "path": self.path,
            "line": self.line,
        }


@dataclass(slots=True)
class ParsedFile:
    """A unit file or drop-in after systemd's syntax rules, before any merging.

    ``fatal`` is set when systemd's own parser gives up on the file (an unterminated section header,
    a line over 1 MiB): what was parsed before it is kept, as systemd keeps it.
    """

    path: str
    size: int = 0
    assignments: list[Assignment] = field(default_factory=list)
    sections: list[tuple[str, int]] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    fatal: Problem | None = None
