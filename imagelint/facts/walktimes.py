"""The ``memory.stat`` walk timed through a soak: its series, its trend in words, whether it was slow.

The soak times the walk (:func:`imagelint.probes.cgroups.probe_memory_stat`) at every Nth sample, so
that a walk growing slower can be set beside the hot-core episodes it causes.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from imagelint.facts.cgroups import ProbeResult
from imagelint.records import dataclass


@dataclass
class WalkSeries:
    """(seconds since the soak's first sample, the walk) in time order."""

    points: list[tuple[float, ProbeResult]] = field(default_factory=list)

    def add(self, at: float, probe: ProbeResult) -> None:
        self.points.append((at, probe))

    def slowest(self) -> ProbeResult | None:
        return max((p for _, p in self.points), key=lambda p: p.seconds, default=None)

    def trend_text(self) -> str:
        """E.g. 'memory.stat walk 3.1 → 9.8 ms over 5 timings (slowest 9.8 ms, 250 → 260 cgroups)'."""
        if not self.points:
            return "memory.stat walk not timed during the soak"
        first, last = self.points[0][1], self.points[-1][1]
        slowest = self.slowest()
        assert slowest is not None
        return (
            f"memory.stat walk {_ms(first.seconds)} → {_ms(last.seconds)} over {len(self.points)} timing(s) "
            f"(slowest {_ms(slowest.seconds)}, {first.cgroups:,} → {last.cgroups:,} cgroups)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "times": [round(t, 3) for t, _ in self.points],
            "seconds": [round(p.seconds, 6) for _, p in self.points],
            "cpu_seconds": [round(p.cpu_seconds, 6) for _, p in self.points],
            "cgroups": [p.cgroups for _, p in self.points],
        }


def _ms(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"
