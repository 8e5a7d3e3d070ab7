"""What a soak measured, for the rules: samples and trends, restart counters, memory.stat walk timings.

:class:`SoakResult` is the sampling loop's record (:mod:`imagelint.soak.runner` fills it);
:class:`SoakFacts` adds what the command measured around it. Both are facts: the check kinds read
them through the fact provider, and nothing here knows how the soak was run.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from imagelint.facts.cgroups import CgroupLayout, ProbeResult, Sample, SubtreeCount
from imagelint.facts.cpurecord import CpuRecord
from imagelint.facts.hotcore import summarise
from imagelint.facts.interrupts import NicInterrupts
from imagelint.facts.systemd.show import RestartDelta, RestartSnapshot, restart_deltas
from imagelint.facts.trend import DEFAULT_ALPHA, Trend, analyse, dying_ratio
from imagelint.facts.walktimes import WalkSeries
from imagelint.records import dataclass


@dataclass
class SoakResult:
    """Everything a soak measured. ``cut_short`` is True when it was stopped before ``duration``."""

    duration: float
    interval: float
    samples: list[Sample]
    cut_short: bool
    started_wall: float
    ended_wall: float
    restarts_start: RestartSnapshot | None = None
    restarts_end: RestartSnapshot | None = None
    sampler_cpu_seconds: float = 0.0  # CPU (user + system) this thread spent inside sample() calls
    errors: list[str] = field(default_factory=list)
    walks: list[tuple[float, ProbeResult]] = field(default_factory=list)  # (s since first sample, walk)

    @property
    def elapsed(self) -> float:
        return self.samples[-1].monotonic - self.samples[0].monotonic if len(self.samples) > 1 else 0.0

    def series(self, name: str) -> tuple[list[float], list[float]]:
        """(seconds since the first sample, values) of ``live`` or ``dying``, skipping unknown values."""
        if not self.samples:
            return [], []
        t0 = self.samples[0].monotonic
        times: list[float] = []
        values: list[float] = []
        for s in self.samples:
            v = getattr(s, name)
            if v is not None:
                times.append(s.monotonic - t0)
                values.append(float(v))
        return times, values

    def trend(self, name: str = "dying", *, alpha: float = DEFAULT_ALPHA) -> Trend | None:
        """The series' trend, or None with fewer than 3 known samples."""
        times, values = self.series(name)
        if len(values) < 3 or times[-1] <= times[0]:
            return None
        return analyse(times, values, alpha=alpha)

    def ratio(self) -> float | None:
        """dying : live at the last sample."""
        return dying_ratio(self.samples[-1].dying, self.samples[-1].live) if self.samples else None

    def restart_deltas(self) -> list[RestartDelta]:
        if self.restarts_start is None or self.restarts_end is None:
            return []
        return restart_deltas(self.restarts_start, self.restarts_end)

    def to_dict(self) -> dict[str, Any]:
        dying, live = self.trend("dying"), self.trend("live")
        return {
            "duration": self.duration,
            "interval": self.interval,
            "elapsed": self.elapsed,
            "cut_short": self.cut_short,
            "started_wall": self.started_wall,
            "ended_wall": self.ended_wall,
            "samples": [s.to_dict() for s in self.samples],
            "trend": {"dying": dying.to_dict() if dying else None, "live": live.to_dict() if live else None},
            "dying_live_ratio": self.ratio(),
            "restarts": {
                "start": self.restarts_start.to_dict() if self.restarts_start else None,
                "end": self.restarts_end.to_dict() if self.restarts_end else None,
                "deltas": [d.to_dict() for d in self.restart_deltas()],
            },
            "sampler_cpu_seconds": self.sampler_cpu_seconds,
            "errors": list(self.errors),
        }


@dataclass
class SoakFacts:
    result: SoakResult
    layout: CgroupLayout
    walk_start: ProbeResult | None = None
    walk_end: ProbeResult | None = None
    journal_restarts: dict[str, int] | None = None  # unit → restarts the journal logged in the window
    journal_note: str = ""  # what the journal lookup found (or why there is none)
    cpu: CpuRecord | None = None  # per-CPU reads of /proc/stat during the soak
    cpu_note: str = ""  # why there are none
    nic_interrupts: NicInterrupts | None = None  # the NIC queues' interrupts per CPU during the soak

    @property
    def walks(self) -> WalkSeries:
        """The memory.stat walk at the start, at every Nth sample, and at the end."""
        series = WalkSeries()
        if self.walk_start is not None:
            series.add(0.0, self.walk_start)
        for at, probe in self.result.walks:
            series.add(at, probe)
        if self.walk_end is not None:
            series.add(self.result.elapsed, self.walk_end)
        return series

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

    def summary_lines(self) -> list[str]:
        """What the soak measured, one line each, for the report's notes (printed even on a pass)."""
        result = self.result
        lines = [
            f"soak: measured {result.elapsed:.0f} s of {result.duration:.0f} s, "
            f"{len(result.samples)} sample(s) every {result.interval:g} s"
        ]
        if self.has_memory_counts:
            for name in ("dying", "live"):
                lines.append(f"soak: {name} memcgs {self._series_line(name)}")
            ratio = result.ratio()
            if ratio is not None:
                lines.append(f"soak: dying:live ratio at the end {ratio:.2f}")
        else:
            lines.append(
                f"soak: no memory cgroup counts on this host ({self.layout.note or 'unknown reason'})"
            )
        lines.append(
            f"soak: memory.stat walk {_walk(self.walk_start)} at start, {_walk(self.walk_end)} at end"
        )
        lines.append(f"soak: restarts {self._restarts_line()}")
        lines.append(f"soak: per-CPU {self._cpu_line()}")
        return lines

    def _cpu_line(self) -> str:
        record = self.cpu
        if record is None:
            return f"time not read ({self.cpu_note or 'no /proc/stat'})"
        cost = f"{1000 * record.cpu_seconds / record.reads:.2f} ms CPU per read" if record.reads else ""
        text = f"/proc/stat read {record.reads:,} times every {record.period:g} s ({cost})"
        longest = summarise(record.tracker(), 0.0).longest
        if longest is None:
            text += (
                "; no CPU spent a 1 s window at ≥ 90% in the kernel while the others' kernel share was ≤ 50%"
            )
        else:
            text += (
                f"; longest run at ≥ 90% kernel time: {longest.seconds:.1f} s on cpu{longest.cpu} "
                f"(others' kernel ≤ {longest.max_others_kernel_share:.0%}, "
                f"busy ≤ {longest.max_others_busy:.0%})"
            )
        return "; ".join([text, *record.notes()])

    def _series_line(self, name: str) -> str:
        _, values = self.result.series(name)
        if not values:
            return "not counted"
        text = f"{values[0]:,.0f} → {values[-1]:,.0f} at start → end"
        trend: Trend | None = self.result.trend(name)
        if trend is None:
            return text + ", no trend (fewer than 3 samples)"
        return (
            f"{text}, slope {trend.slope_per_hour:+,.0f}/h "
            f"({trend.ci_low_per_hour:+,.0f} to {trend.ci_high_per_hour:+,.0f}), "
            f"p-value {trend.p_value:.3g}" + (" (significant)" if trend.significant else "")
        )

    def _restarts_line(self) -> str:
        start = self.result.restarts_start
        if start is None or not start.available:
            counters = f"counters not read ({start.reason if start else 'no snapshot'})"
        else:
            restarted = [d for d in self.result.restart_deltas() if d.restarts]
            listed = ", ".join(f"{d.unit} +{d.restarts}" for d in restarted[:5])
            more = f" and {len(restarted) - 5} more" if len(restarted) > 5 else ""
            counters = f"{len(restarted)} of {len(start.units)} service(s) restarted" + (
                f": {listed}{more}" if restarted else ""
            )
        if self.journal_restarts is None:
            journal = f"journal: {self.journal_note or 'not read'}"
        else:
            journal = f"journal logged {sum(self.journal_restarts.values())} restart(s)"
        return f"{counters}; {journal}"

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.result.to_dict(),
            "layout": self.layout.to_dict(),
            "memory_stat_walk": {
                "start": self.walk_start.to_dict() if self.walk_start else None,
                "end": self.walk_end.to_dict() if self.walk_end else None,
                "series": self.walks.to_dict(),
            },
            "cpu": self._cpu_dict(),
            "growing_subtrees": [{"path": p, "dying_delta": n} for p, n in self.growing_subtrees()],
            "journal_restarts": self.journal_restarts,
            "journal_note": self.journal_note,
        }

    def _cpu_dict(self) -> dict[str, Any] | None:
        record = self.cpu
        if record is None:
            return {"note": self.cpu_note}
        return {
            **record.to_dict(),
            "series": record.series(self.result.interval),
            "hot_core": summarise(record.tracker(), 0.0).to_dict(record.origin),
            "nic_interrupts": self.nic_interrupts.to_dict() if self.nic_interrupts else None,
        }


def _walk(probe: ProbeResult | None) -> str:
    if probe is None:
        return "not timed"
    errors = f", {probe.errors} error(s)" if probe.errors else ""
    return f"{probe.cgroups:,} cgroup(s) in {probe.seconds * 1000:.1f} ms{errors}"
