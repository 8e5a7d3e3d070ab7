"""What a soak hands to the rules: the samples and trends, restart counters, and memory.stat walk timings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imagelint.facts.cgroups import CgroupLayout, ProbeResult, SubtreeCount
from imagelint.soak.runner import SoakResult


@dataclass
class SoakFacts:
    result: SoakResult
    layout: CgroupLayout
    walk_start: ProbeResult | None = None
    walk_end: ProbeResult | None = None
    journal_restarts: dict[str, int] | None = None  # unit → restarts the journal logged in the window
    journal_note: str = ""  # what the journal lookup found (or why there is none)

    @property
    def has_memory_counts(self) -> bool:
        return bool(self.result.samples) and self.result.samples[-1].dying is not None

    def growing_subtrees(self, limit: int = 3) -> list[tuple[str, int]]:
        """v2 subtrees whose dying count grew between the first and last sample, most first."""
        if len(self.result.samples) < 2:
            return []

        def dying(subtrees: tuple[SubtreeCount, ...]) -> dict[str, int]:
            return {
                s.path: (s.dying_memory if s.dying_memory is not None else s.dying)
                for s in subtrees
                if s.dying is not None
            }

        first, last = dying(self.result.samples[0].subtrees), dying(self.result.samples[-1].subtrees)
        grown = [(path, n - first.get(path, 0)) for path, n in last.items() if n > first.get(path, 0)]
        return sorted(grown, key=lambda item: -item[1])[:limit]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.result.to_dict(),
            "layout": self.layout.to_dict(),
            "memory_stat_walk": {
                "start": self.walk_start.to_dict() if self.walk_start else None,
                "end": self.walk_end.to_dict() if self.walk_end else None,
            },
            "growing_subtrees": [{"path": p, "dying_delta": n} for p, n in self.growing_subtrees()],
            "journal_restarts": self.journal_restarts,
            "journal_note": self.journal_note,
        }
