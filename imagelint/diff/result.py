"""A finished diff: both sides, the changes with their actions, and the verdict."""

from __future__ import annotations

from typing import Any

from imagelint import __version__
from imagelint.diff.compare import Change, Side
from imagelint.records import dataclass
from imagelint.report.model import Verdict

DIFF_SCHEMA_VERSION = 1
ORDER = {"fail": 0, "warn": 1, "allowed": 2, "note": 3}


@dataclass
class DiffResult:
    old: Side
    new: Side
    changes: list[Change]  # listed ones (not "ignore"), most severe action first
    verdict: Verdict
    volumes: list[Any] | None = None  # a diff of two AMIs: each device's pair (to_dict()), by device

    def counts(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for c in self.changes:
            by_kind[c.kind] = by_kind.get(c.kind, 0) + 1
        actions = [c.action for c in self.changes]
        return {
            "changes": len(self.changes),
            "fail": actions.count("fail"),
            "warn": actions.count("warn"),
            "allowed": actions.count("allowed"),
            "note": actions.count("note"),
            "by_kind": dict(sorted(by_kind.items())),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": DIFF_SCHEMA_VERSION,
            "tool": {"name": "imagelint", "version": __version__},
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "verdict": self.verdict.value,
            "exit_code": int(self.verdict.exit_code),
            "counts": self.counts(),
            "changes": [c.to_dict() for c in self.changes],
            **({} if self.volumes is None else {"volumes": [v.to_dict() for v in self.volumes]}),
        }
