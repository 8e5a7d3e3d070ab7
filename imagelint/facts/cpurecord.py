"""What the per-CPU sampler kept of ``/proc/stat``: per read, its time span and per-CPU deltas.

A :class:`CpuRecord` is filled by :class:`imagelint.probes.cpu.CpuSampler` on the running host. The
deltas are kept compactly (four 32-bit numbers per CPU per read) so that thresholds can be applied
afterwards, by the rule, with its parameters: :meth:`CpuRecord.tracker` replays them through an
:class:`~imagelint.facts.hotcore.EpisodeTracker`. The record also says what was tolerated (older
format, hotplug, counters going backwards, masked intervals, the memory cap).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import field
from typing import Any

from imagelint.facts.cpustat import CpuDelta, Interval, ProcStat, diff
from imagelint.facts.hotcore import EpisodeTracker, HotCoreParams
from imagelint.records import dataclass

DEFAULT_MAX_CPU_INTERVALS = 2_000_000  # ~32 MB: one hour at 10 reads a second on 55 CPUs
MAX_EVENTS = 20  # hotplug / backwards events listed (all are counted)
MAX_SERIES_POINTS = 1 << 16  # (span, CPU) shares per series in the report: 360 spans of 182 CPUs
_U32 = 0xFFFFFFFF


@dataclass
class CpuRecord:
    """What a :class:`CpuSampler` kept: per read, its time span and per-CPU deltas (None: a gap)."""

    period: float
    origin: float  # monotonic time of the first read
    # Kept intervals in flat arrays (no object per read: a record of a million one-CPU reads is a
    # million intervals): t0, t1 of each; where its CPUs end in ``cells``; whether it was masked
    spans: array[float] = field(default_factory=lambda: array("d"))
    ends: array[int] = field(default_factory=lambda: array("Q"))
    masks: array[int] = field(default_factory=lambda: array("B"))
    cells: array[int] = field(default_factory=lambda: array("I"))  # cpu, kernel, busy, total per CPU
    reads: int = 0
    masked: int = 0  # intervals not judged because imagelint's own walk ran in them
    late: int = 0  # grid slots skipped because a read came late
    cpu_seconds: float = 0.0  # CPU time the sampler thread spent reading and parsing
    online: list[int] = field(default_factory=list)  # CPUs at the first read
    columns_note: str | None = None
    events: list[str] = field(default_factory=list)  # hotplug, counters going backwards (first MAX_EVENTS)
    counts: dict[str, int] = field(default_factory=dict)  # appeared, disappeared, backwards, iowait_clamped
    truncated_at: float | None = None  # seconds after origin when the cap stopped keeping reads
    error: str | None = None  # a read failed: nothing after it was measured
    max_cpu_intervals: int = DEFAULT_MAX_CPU_INTERVALS
    kept: int = 0  # CPU intervals kept
    keep: bool = True  # False: intervals are counted, not kept (a live tracker has them)

    def add(self, prev: ProcStat, cur: ProcStat, t0: float, t1: float, *, masked: bool = False) -> Interval:
        """Keep the interval between two reads (``masked``: imagelint's own walk ran in it, not judged).

        Returns the interval, kept or not (with ``keep`` off, or past the memory cap, it is only counted)."""
        interval = diff(prev, cur)
        self._events(interval, t1 - self.origin)
        self.masked += masked
        if not self.keep or self.truncated_at is not None:
            return interval
        if self.kept + len(cur.cpus) > self.max_cpu_intervals:
            self.truncated_at = t0 - self.origin
            return interval
        self.spans.extend((t0, t1))
        self.masks.append(masked)
        if not masked:
            for cpu, d in interval.deltas.items():
                self.cells.extend((cpu, min(d.kernel, _U32), min(d.busy, _U32), min(d.total, _U32)))
            self.kept += len(interval.deltas)
        self.ends.append(len(self.cells))
        return interval

    def _events(self, interval: Interval, at: float) -> None:
        happened = [
            ("appeared", [f"cpu{c} came online" for c in interval.appeared]),
            ("disappeared", [f"cpu{c} went offline" for c in interval.disappeared]),
            ("backwards", [f"cpu{c} {name} went backwards" for c, name in interval.backwards]),
            ("iowait_clamped", [""] * len(interval.iowait_clamped)),
        ]
        for name, texts in happened:
            if not texts:
                continue
            self.counts[name] = self.counts.get(name, 0) + len(texts)
            for text in texts:
                if text and len(self.events) < MAX_EVENTS:
                    self.events.append(f"{at:.1f} s: {text}")

    def intervals(self) -> Iterator[tuple[float, float, Interval | None]]:
        start = 0
        for i, end in enumerate(self.ends):
            t0, t1 = self.spans[2 * i], self.spans[2 * i + 1]
            if self.masks[i]:
                yield t0, t1, None
            else:
                c = self.cells
                deltas = {c[j]: CpuDelta(c[j + 1], c[j + 2], c[j + 3]) for j in range(start, end, 4)}
                yield t0, t1, Interval(deltas)
            start = end

    def tracker(self, params: HotCoreParams | None = None) -> EpisodeTracker:
        """Every kept interval replayed through a tracker with these thresholds (closed at the end)."""
        tracker = EpisodeTracker(params)
        for t0, t1, interval in self.intervals():
            if interval is None:
                tracker.gap(bridge=True)  # imagelint's own walk ran in it
            else:
                tracker.feed(t0, t1, interval)
        tracker.close()
        return tracker

    @property
    def seconds(self) -> float:
        return self.spans[-1] - self.origin if self.spans else 0.0

    def series(self, every: float) -> dict[str, Any]:
        """Kernel and busy share per CPU over consecutive spans of ``every`` seconds (the soak's
        interval), doubled until CPUs x spans is at most ``MAX_SERIES_POINTS``.

        Built one span at a time (the intervals are kept in time order), so what it holds is the
        output, itself bounded."""
        slots, cpus = self._slots(every)
        while slots > 1 and slots * len(cpus) > MAX_SERIES_POINTS:
            every *= 2
            slots, cpus = self._slots(every)
        times: list[float] = []
        kernel: dict[int, list[float | None]] = {c: [] for c in cpus}
        busy: dict[int, list[float | None]] = {c: [] for c in cpus}
        current: int | None = None
        sums: dict[int, list[int]] = {}

        def flush() -> None:
            if current is None:
                return
            times.append(round(min((current + 1) * every, self.seconds), 3))
            for cpu in cpus:
                k, b, t = sums.get(cpu, (0, 0, 0))
                kernel[cpu].append(round(k / t, 3) if t else None)
                busy[cpu].append(round(b / t, 3) if t else None)

        for _, t1, interval in self.intervals():
            if interval is None:
                continue
            slot = self._slot(t1, every)
            if slot != current:
                flush()
                current, sums = slot, {}
            for cpu, d in interval.deltas.items():
                v = sums.setdefault(cpu, [0, 0, 0])
                v[0] += d.kernel
                v[1] += d.busy
                v[2] += d.total
        flush()
        return {
            "every": every,
            "times": times,
            "kernel_share": {f"cpu{c}": kernel[c] for c in cpus},
            "busy_share": {f"cpu{c}": busy[c] for c in cpus},
        }

    def _slot(self, t1: float, every: float) -> int:
        return int((t1 - self.origin - 1e-9) // every)

    def _slots(self, every: float) -> tuple[int, list[int]]:
        """How many spans of ``every`` seconds hold a judged interval, and the CPUs they hold."""
        slots, last = 0, None
        cpus: set[int] = set()
        start = 0
        for i, end in enumerate(self.ends):
            if not self.masks[i]:
                slot = self._slot(self.spans[2 * i + 1], every)
                slots += slot != last
                last = slot
                cpus.update(self.cells[start:end:4])
            start = end
        return slots, sorted(cpus)

    def notes(self) -> list[str]:
        """What was tolerated, one sentence each (older format, hotplug, counters backwards, gaps)."""
        out = [self.columns_note] if self.columns_note else []
        c = self.counts
        if c.get("appeared") or c.get("disappeared"):
            out.append(
                f"CPUs went online {c.get('appeared', 0)} and offline {c.get('disappeared', 0)} time(s) "
                "during the soak (hotplug); each is judged only while it stays online"
            )
        if c.get("backwards"):
            out.append(
                f"per-CPU counters went backwards {c['backwards']} time(s) (wrap or reset): "
                "those intervals of those CPUs are not judged"
            )
        if c.get("iowait_clamped"):
            out.append(f"iowait decreased {c['iowait_clamped']} time(s) (documented in proc(5)): taken as 0")
        if self.masked:
            out.append(f"{self.masked} interval(s) not judged: imagelint's own memory.stat walk ran in them")
        if self.truncated_at is not None:
            out.append(f"reads stopped being kept after {self.truncated_at:.0f} s (memory cap)")
        if self.error:
            out.append(f"per-CPU reads stopped: {self.error}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "reads": self.reads,
            "seconds": round(self.seconds, 3),
            "online_at_start": [f"cpu{c}" for c in self.online],
            "cpu_seconds": round(self.cpu_seconds, 6),
            "cpu_ms_per_read": round(1000 * self.cpu_seconds / self.reads, 4) if self.reads else None,
            "masked_intervals": self.masked,
            "late_slots": self.late,
            "events": list(self.events),
            "counts": dict(self.counts),
            "notes": self.notes(),
            "error": self.error,
        }
