"""What one pass of the watch loop knows: an immutable snapshot that every output renders.

The loop builds a new :class:`WatchState` after each pass and swaps it in whole, so a scrape served
from another thread never sees half an update.
"""

from __future__ import annotations

from dataclasses import field

from imagelint.facts.trend import Trend
from imagelint.records import dataclass
from imagelint.watch.units import UnitView

SOURCES = ("cgroups", "memory_stat", "systemd", "journal", "rules", "cpu")
"""Every source the watch reads; each has an ``imagelint_source_up`` series."""


@dataclass(frozen=True)
class SourceStatus:
    up: bool
    reason: str | None = None


@dataclass(frozen=True)
class RuleOutcome:
    rule_id: str
    name: str
    outcome: str  # imagelint.report.model.Outcome value


@dataclass(frozen=True)
class CpuSaturation:
    """Per-CPU saturation from the /proc/stat sampler (issue 18, :mod:`imagelint.watch.cpu`)."""

    saturated_seconds: dict[str, float]  # cpu → seconds saturated since the watch started
    longest_episode_seconds: float  # the longest saturated episode within the window (0: none)
    longest_episode_cpu: str | None = None


@dataclass(frozen=True)
class WatchState:
    started_wall: float
    sources: dict[str, SourceStatus] = field(default_factory=dict)
    passes: int = 0
    live: int | None = None
    dying: int | None = None
    dying_source: str | None = None
    trend: Trend | None = None
    window_samples: int = 0
    window_seconds: float = 0.0
    walk_seconds: float | None = None
    walk_cgroups: int | None = None
    units: tuple[UnitView, ...] = ()
    units_overflow: int = 0
    units_loaded: int = 0
    units_looping: int = 0
    signals: dict[str, int] = field(default_factory=dict)
    journal_entries: int = 0
    journal_bad_entries: int = 0
    journal_files: int = 0
    journal_unreadable: int = 0
    verdicts: tuple[RuleOutcome, ...] = ()
    cpu: CpuSaturation | None = None
