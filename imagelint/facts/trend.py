"""Trend statistics for soak series, in pure Python: Theil–Sen slope and the Mann–Kendall test.

A soak yields a short series of counts (dying memory cgroups, say 60 samples over 5 minutes) that
is noisy (other software creates and removes cgroups), often flat with many ties, and sometimes
has outliers. Least squares is pulled by outliers and its t-test assumes normal residuals; the
usual robust pair is used instead:

- **Theil–Sen**: the slope is the median of the slopes between every pair of samples (with their
  real timestamps, so an uneven interval does no harm); Sen's (1968) rank-based confidence
  interval comes with it.
- **Mann–Kendall**: S = Σ sign(x_j − x_i) over i < j; under "no trend" S has mean 0 and variance
  [n(n−1)(2n+5) − Σ t(t−1)(2t+5)] / 18, the sum running over groups of t tied values (the tie
  correction, which matters here: a flat count series is mostly ties). The normal approximation
  with a continuity correction gives Z and a two-sided p-value; it is adequate from about n = 10.

A trend is *significant* when p < alpha. Whether it is a *finding* is the rule's call (rate above a
threshold, count above a ceiling); the numbers here are what it judges.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

from imagelint.records import dataclass

SECONDS_PER_HOUR = 3600.0
DEFAULT_ALPHA = 0.01


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def pairwise_slopes(times: Sequence[float], values: Sequence[float]) -> list[float]:
    """Slopes (per unit of ``times``) between every pair of points with distinct times, sorted."""
    if len(times) != len(values):
        raise ValueError("times and values differ in length")
    slopes = []
    n = len(times)
    for i in range(n - 1):
        ti, vi = times[i], values[i]
        for j in range(i + 1, n):
            dt = times[j] - ti
            if dt != 0:
                slopes.append((values[j] - vi) / dt)
    slopes.sort()
    return slopes


def theil_sen(times: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """The Theil–Sen line: (slope per unit of ``times``, intercept at time 0)."""
    slopes = pairwise_slopes(times, values)
    if not slopes:
        raise ValueError("a slope needs two points at different times")
    slope = _median(slopes)
    intercept = _median([v - slope * t for t, v in zip(times, values, strict=True)])
    return slope, intercept


@dataclass(frozen=True)
class MannKendall:
    """The Mann–Kendall statistic S, its tie-corrected variance, Z and the two-sided p-value."""

    n: int
    s: int
    var_s: float
    z: float
    p_value: float


def tie_groups(values: Sequence[float]) -> list[int]:
    """Sizes of the groups of equal values (only groups of two or more)."""
    return sorted(t for t in Counter(values).values() if t > 1)


def mann_kendall(values: Sequence[float]) -> MannKendall:
    """Mann–Kendall trend test on a series in time order (normal approximation, tie-corrected)."""
    n = len(values)
    if n < 3:
        raise ValueError("Mann–Kendall needs at least 3 values")
    s = 0
    for i in range(n - 1):
        vi = values[i]
        for j in range(i + 1, n):
            d = values[j] - vi
            s += (d > 0) - (d < 0)
    var_s = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in tie_groups(values))) / 18.0
    if var_s <= 0:  # every value equal: no evidence of anything
        return MannKendall(n, s, 0.0, 0.0, 1.0)
    if s > 0:
        z = (s - 1) / math.sqrt(var_s)
    elif s < 0:
        z = (s + 1) / math.sqrt(var_s)
    else:
        z = 0.0
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return MannKendall(n, s, var_s, z, min(1.0, p))


def sen_confidence_interval(slopes: Sequence[float], var_s: float, alpha: float) -> tuple[float, float]:
    """Sen's (1968) distribution-free interval for the Theil–Sen slope, from the sorted pair slopes.

    With N pair slopes and C = z_{1−α/2} · sqrt(Var S), the bounds are the slopes of rank
    (N − C)/2 and (N + C)/2 + 1 (1-based, rounded, clamped to the ends).
    """
    n = len(slopes)
    if n == 0:
        raise ValueError("no slopes")
    c = NormalDist().inv_cdf(1.0 - alpha / 2.0) * math.sqrt(max(var_s, 0.0))
    lo = round((n - c) / 2.0)
    hi = round((n + c) / 2.0) + 1
    lo_i = min(max(lo, 1), n) - 1
    hi_i = min(max(hi, 1), n) - 1
    return slopes[lo_i], slopes[hi_i]


@dataclass(frozen=True)
class Trend:
    """The trend of one count series over a soak; slopes are per hour."""

    n: int
    span_seconds: float
    first: float
    last: float
    slope_per_hour: float
    ci_low_per_hour: float
    ci_high_per_hour: float
    alpha: float
    mk_s: int
    mk_z: float
    p_value: float
    significant: bool
    increases: int  # how many steps went up: a leak rises in many steps, a one-off burst in one

    @property
    def growing(self) -> bool:
        """Significant and upwards."""
        return self.significant and self.slope_per_hour > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "span_seconds": self.span_seconds,
            "first": self.first,
            "last": self.last,
            "delta": self.last - self.first,
            "slope_per_hour": self.slope_per_hour,
            "slope_ci_per_hour": [self.ci_low_per_hour, self.ci_high_per_hour],
            "alpha": self.alpha,
            "mann_kendall_s": self.mk_s,
            "mann_kendall_z": self.mk_z,
            "p_value": self.p_value,
            "significant": self.significant,
            "growing": self.growing,
            "increases": self.increases,
        }


def analyse(times: Sequence[float], values: Sequence[float], *, alpha: float = DEFAULT_ALPHA) -> Trend:
    """Theil–Sen slope (per hour; ``times`` in seconds) with Mann–Kendall significance at ``alpha``."""
    if len(times) != len(values):
        raise ValueError("times and values differ in length")
    if len(values) < 3:
        raise ValueError("a trend needs at least 3 samples")
    slopes = pairwise_slopes(times, values)
    if not slopes:
        raise ValueError("a slope needs samples at different times")
    slope = _median(slopes)
    mk = mann_kendall(values)
    lo, hi = sen_confidence_interval(slopes, mk.var_s, alpha)
    increases = sum(1 for a, b in itertools.pairwise(values) if b > a)
    return Trend(
        n=len(values),
        span_seconds=float(times[-1] - times[0]),
        first=float(values[0]),
        last=float(values[-1]),
        slope_per_hour=slope * SECONDS_PER_HOUR,
        ci_low_per_hour=lo * SECONDS_PER_HOUR,
        ci_high_per_hour=hi * SECONDS_PER_HOUR,
        alpha=alpha,
        mk_s=mk.s,
        mk_z=mk.z,
        p_value=mk.p_value,
        significant=mk.p_value < alpha,
        increases=increases,
    )


def dying_ratio(dying: float | None, live: float | None) -> float | None:
    """dying : live (the incident: ~68,440 : 240 ≈ 285). None when either is unknown or live is 0."""
    if dying is None or live is None or live <= 0:
        return None
    return dying / live


def project(current: float, slope_per_hour: float, days: float) -> float:
    """The count after ``days`` more days at this rate (never below zero)."""
    return max(0.0, current + slope_per_hour * 24.0 * days)


def days_until(current: float, slope_per_hour: float, target: float) -> float | None:
    """Days until the count reaches ``target`` at this rate: 0 if already there, None if never."""
    if current >= target:
        return 0.0
    if slope_per_hour <= 0:
        return None
    return (target - current) / (slope_per_hour * 24.0)


def projection_text(
    current: float, slope_per_hour: float, *, days: float | None = None, target: float | None = None
) -> str:
    """ "at this rate: 70,000 in 48 days" — for a given horizon, or for a given target count."""
    if target is not None:
        d = days_until(current, slope_per_hour, target)
        if d is None:
            return f"at this rate: never reaches {target:,.0f}"
        return f"at this rate: {target:,.0f} in {_days(d)}"
    horizon = 30.0 if days is None else days
    return f"at this rate: {project(current, slope_per_hour, horizon):,.0f} in {_days(horizon)}"


def _days(d: float) -> str:
    if d < 1:
        hours = d * 24
        return f"{hours:.1f} hours" if hours < 10 else f"{hours:.0f} hours"
    return f"{d:.1f} days" if d < 10 else f"{d:,.0f} days"
