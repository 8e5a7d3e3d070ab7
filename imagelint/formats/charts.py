"""The soak and the fleet as pictures: the chart data every format draws, read from the report's facts.

A format never reads a ``SoakFacts`` object: it reads what the report carries (``report.facts["soak"]``,
:meth:`imagelint.facts.soak.SoakFacts.to_dict`, and ``report.facts["instances"]``, the fleet's rows),
so a report read back from JSON or merged from many hosts draws the same pictures. Those facts are
treated as untrusted data: a value that is not a finite number is skipped, a string is only ever a
label (escaped by each format for its channel; :func:`for_mermaid` for Mermaid).

**Bounded sizes.** A time series longer than :data:`MAX_POINTS` is *downsampled*, never truncated:
the samples are cut into at most ``MAX_POINTS`` consecutive buckets of near-equal size and each
bucket is drawn as its **maximum** at its last sample's time. The maximum, not the mean, because the
faults a soak looks for are spikes (a second of a pinned core, a burst of dying cgroups) that a mean
would flatten. Every downsampled chart says so: "60 points, downsampled from 3,600 samples (bucket
max)". Bar charts show at most :data:`MAX_BARS` bars, the largest, and say how many were left out.

Three drawings share this data: :func:`sparkline` (text), :func:`mermaid_line` and
:func:`mermaid_bars` (Markdown and the GitHub step summary, Mermaid ``xychart-beta``), and the inline
SVG of the ``html`` format.
"""

from __future__ import annotations

import math
import re
from typing import Any

from imagelint.records import dataclass
from imagelint.report import Report
from imagelint.report.escape import visible

MAX_POINTS = 60
MAX_BARS = 6  # so that an instance id fits under its bar in the Mermaid chart
MAX_LABEL = 40  # characters of a bar's label (a unit name, an instance id); longer ones end in "…"
BLOCKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Series:
    """One soak series over time, ready to draw (at most ``MAX_POINTS`` points)."""

    title: str  # ours, never from the image
    unit: str  # what the y axis counts
    times: list[float]  # seconds since the soak's first sample
    values: list[float]
    samples: int  # how many points there were before downsampling
    note: str = ""  # e.g. the hot-core episode
    marked: tuple[float, float] | None = None  # a span of time to shade (the hot-core episode), in seconds

    @property
    def sampling(self) -> str:
        """How the points relate to the samples, in words."""
        if self.samples > len(self.values):
            return f"{len(self.values)} points, downsampled from {self.samples:,} samples (bucket max)"
        return f"{len(self.values)} point(s)"


@dataclass(frozen=True)
class Bars:
    """Labelled counts (restarts per unit, failing findings per host): ``labels`` may come from the image."""

    title: str
    unit: str
    labels: list[str]
    values: list[float]
    left_out: int = 0  # how many smaller bars are not shown

    @property
    def sampling(self) -> str:
        return f"{self.left_out} more not shown" if self.left_out else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def downsample(
    times: list[float], values: list[float], limit: int = MAX_POINTS
) -> tuple[list[float], list[float]]:
    """At most ``limit`` points: consecutive buckets, each its maximum at its last time (see the module)."""
    n = len(values)
    if n <= limit:
        return list(times), list(values)
    out_t: list[float] = []
    out_v: list[float] = []
    for i in range(limit):
        lo, hi = i * n // limit, (i + 1) * n // limit
        out_t.append(times[hi - 1])
        out_v.append(max(values[lo:hi]))
    return out_t, out_v


def _series(
    title: str,
    unit: str,
    pairs: list[tuple[float, float]],
    note: str = "",
    marked: tuple[float, float] | None = None,
) -> Series | None:
    if not pairs:
        return None
    times, values = downsample([t for t, _ in pairs], [v for _, v in pairs])
    return Series(title, unit, times, values, len(pairs), note, marked)


def _pairs(times: Any, values: Any) -> list[tuple[float, float]]:
    if not isinstance(times, list) or not isinstance(values, list):
        return []
    out = []
    for t, v in zip(times, values, strict=False):
        tt, vv = _number(t), _number(v)
        if tt is not None and vv is not None:
            out.append((tt, vv))
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def soak_series(report: Report) -> list[Series]:
    """The soak's time series: dying and live memcgs, the busiest CPU's kernel share, the walk's time."""
    soak = _dict((report.facts or {}).get("soak"))
    if not soak:
        return []
    samples = [s for s in soak.get("samples") or [] if isinstance(s, dict)]
    stamps = [_number(s.get("monotonic")) for s in samples]
    t0 = next((t for t in stamps if t is not None), 0.0)
    times = [t - t0 if t is not None else None for t in stamps]  # a sample with no time is not drawn
    out: list[Series | None] = []
    for name in ("dying", "live"):
        out.append(_series(f"{name} memory cgroups", "memcgs", _pairs(times, [s.get(name) for s in samples])))
    out.append(_kernel_series(_dict(soak.get("cpu"))))
    walk = _dict(_dict(soak.get("memory_stat_walk")).get("series"))
    seconds = [None if (n := _number(v)) is None else n * 1000 for v in walk.get("seconds") or []]
    out.append(_series("memory.stat walk", "ms", _pairs(walk.get("times"), seconds)))
    return [s for s in out if s is not None]


def _kernel_series(cpu: dict[str, Any]) -> Series | None:
    """The kernel share of the CPU whose share peaked highest; the hot-core episode, if any, in ``note``."""
    shares = _dict(_dict(cpu.get("series")).get("kernel_share"))
    times = _dict(cpu.get("series")).get("times")
    best: tuple[float, str, list[tuple[float, float]]] | None = None
    for name, values in shares.items():
        pairs = _pairs(times, values)
        peak = max((v for _, v in pairs), default=None)
        if peak is not None and (best is None or peak > best[0]):
            best = (peak, str(name), pairs)
    if best is None:
        return None
    longest = _dict(_dict(cpu.get("hot_core")).get("longest"))
    note, marked = "", None
    seconds, start, core = (
        _number(longest.get("seconds")),
        _number(longest.get("start")),
        _number(longest.get("cpu")),
    )
    if seconds is not None and start is not None and core is not None:
        note = f"hot core cpu{core:.0f} {start:.0f}-{start + seconds:.0f} s at ≥ 90%"
        marked = (start, start + seconds)
    # the CPU name is the sampler's own ("cpu3"), but the facts may have been read back: keep it plain
    label = re.sub(r"[^a-z0-9]", "", best[1])[:12] or "a CPU"
    shares_pct = [(t, v * 100) for t, v in best[2]]
    return _series(f"{label} kernel time, the busiest CPU", "%", shares_pct, note, marked)


def restart_bars(report: Report) -> Bars | None:
    """Restarts during the soak of the units that restarted most."""
    soak = _dict((report.facts or {}).get("soak"))
    deltas = _dict(soak.get("restarts")).get("deltas") or []
    counted = [
        (str(d.get("unit")), n)
        for d in deltas
        if isinstance(d, dict) and (n := _number(d.get("restarts"))) is not None and n > 0
    ]
    return _bars("restarts during the soak", "restarts", counted)


def _bars(title: str, unit: str, counted: list[tuple[str, float]]) -> Bars | None:
    if not counted:
        return None
    top = sorted(counted, key=lambda item: -item[1])[:MAX_BARS]
    labels = [label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…" for label, _ in top]
    return Bars(title, unit, labels, [n for _, n in top], len(counted) - len(top))


@dataclass(frozen=True)
class Host:
    """One row of a fleet report (``facts["instances"]``)."""

    instance: str
    status: str
    verdict: str
    failing: int
    findings: int
    errors: int


def fleet_hosts(report: Report) -> list[Host]:
    rows = (report.facts or {}).get("instances")
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict):
            counts = [int(_number(row.get(k)) or 0) for k in ("failing", "findings", "errors")]
            out.append(
                Host(
                    str(row.get("instance_id", "")),
                    str(row.get("status") or ""),
                    str(row.get("verdict", "")),
                    *counts,
                )
            )
    return out


def fleet_outliers(hosts: list[Host]) -> Bars | None:
    """The hosts with the most failing findings (errors, then findings, break ties); none if all are clean."""
    ranked = sorted(
        (h for h in hosts if h.failing or h.errors), key=lambda h: (-h.failing, -h.errors, -h.findings)
    )
    return _bars("hosts with the most failing findings", "failing", [(h.instance, h.failing) for h in ranked])


# -- drawings -----------------------------------------------------------------------------------------


def sparkline(values: list[float]) -> str:
    """One block character per value, from ▁ (the series' minimum) to █ (its maximum)."""
    if not values:
        return ""
    low, high = min(values), max(values)
    if high == low:
        return BLOCKS[0] * len(values)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round((v - low) / (high - low) * top)] for v in values)


def number(value: float) -> str:
    """A value as Mermaid, SVG and people read it: no exponent, at most 3 decimals."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def headline(series: Series) -> str:
    """The chart's title: what it shows, and the note (the hot core) when there is one."""
    return f"{series.title} ({series.unit})" + (f"; {series.note}" if series.note else "")


_MERMAID_SAFE = re.compile(r"[A-Za-z0-9 .,/_+-]")


def for_mermaid(text: str) -> str:
    """One string for a double-quoted Mermaid label, on one line.

    Mermaid has no backslash escapes; it reads entity codes (``#35;``, ``#quot;``) in any label and
    decodes them after parsing. So every character but letters, digits, space and ``.,/_+-`` is
    written as a decimal entity code: a quote cannot end the label, a bracket or comma cannot end an
    axis list, ``%%`` cannot start a comment, ``#`` cannot start a code of its own, a backtick cannot
    close a Markdown fence, and ``<br>`` cannot break a line. Control and invisible characters become
    visible escapes first (so no newline survives).
    """
    return "".join(c if _MERMAID_SAFE.fullmatch(c) else f"#{ord(c)};" for c in visible(text))


# wide enough for our titles; one colour for the one data series (the default palette's first is too pale)
_CONFIG = [
    "---",
    "config:",
    "  xyChart:",
    "    width: 900",
    "    xAxis:",
    "      labelFontSize: 12",
    "  themeVariables:",
    "    xyChart:",
    '      plotColorPalette: "#cf222e"',
    "---",
]


MERMAID_TICKS = 10  # Mermaid asks d3 for about ten y ticks: a range of at least ten makes them whole


def _y_range(kind: str, values: list[float]) -> str:
    """Bars start at zero; a line of whole counts gets a range its ticks divide into whole numbers
    (left to Mermaid, a flat line of 112 memcgs has ticks like 112.8)."""
    if kind == "bar":
        return f" 0 --> {number(max(values) or 1)}"
    if all(float(v).is_integer() for v in values):
        low = math.floor(min(values))
        return f" {low} --> {max(math.ceil(max(values)), low + MERMAID_TICKS)}"
    return ""


def _mermaid(title: str, x_axis: str, y_axis: str, kind: str, values: list[float]) -> list[str]:
    y_range = _y_range(kind, values)
    return [
        "```mermaid",
        *_CONFIG,
        "xychart-beta",
        f'    title "{for_mermaid(title)}"',
        f"    x-axis {x_axis}",
        f'    y-axis "{for_mermaid(y_axis)}"{y_range}',
        f"    {kind} [{', '.join(number(v) for v in values)}]",
        "```",
    ]


def mermaid_line(series: Series) -> list[str]:
    """A Mermaid ``xychart-beta`` line chart of ``series`` over seconds, as fenced Markdown lines."""
    end = number(max(series.times[-1], series.times[0] + 1))
    x_axis = f'"{for_mermaid(f"seconds; {series.sampling}")}" {number(series.times[0])} --> {end}'
    return _mermaid(headline(series), x_axis, series.unit, "line", series.values)


def mermaid_bars(bars: Bars) -> list[str]:
    """A Mermaid ``xychart-beta`` bar chart, one bar per label, as fenced Markdown lines."""
    labels = ", ".join(f'"{for_mermaid(label)}"' for label in bars.labels)
    title = "; ".join(filter(None, [bars.title, bars.sampling]))
    return _mermaid(title, f"[{labels}]", bars.unit, "bar", bars.values)
