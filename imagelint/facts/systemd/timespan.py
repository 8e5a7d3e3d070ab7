"""systemd time spans (``parse_sec()``): ``10``, ``10s``, ``1min 30s``, ``500ms``, ``1.5h``, ``infinity``.

A value is one or more ``NUMBER[UNIT]`` components, optionally separated by blanks; a number
without a unit is in seconds (the default unit of every setting imagelint reads: ``RestartSec=``,
``StartLimitIntervalSec=``...). Units are systemd's: us/usec/µs, ms/msec, s/sec/second(s),
m/min/minute(s), h/hr/hour(s), d/day(s), w/week(s), M/month(s) (30.44 days), y/year(s) (365.25
days). ``infinity`` is :data:`math.inf`. Anything else raises :class:`ValueError`.
"""

from __future__ import annotations

import math
import re

_UNITS: dict[str, float] = {
    "us": 1e-6,
    "usec": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
    "weeks": 604800.0,
    "M": 2629800.0,
    "month": 2629800.0,
    "months": 2629800.0,
    "y": 31557600.0,
    "year": 31557600.0,
    "years": 31557600.0,
}
_COMPONENT = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Zµμ]*)")


def parse_timespan(text: str) -> float:
    """Seconds (``math.inf`` for ``infinity``); ValueError for anything systemd would refuse."""
    value = text.strip()
    if value == "infinity":
        return math.inf
    if not value:
        raise ValueError("empty time span")
    total = 0.0
    pos = 0
    while pos < len(value):
        match = _COMPONENT.match(value, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"invalid time span {text!r}")
        number, unit = match.groups()
        if unit and unit not in _UNITS:
            raise ValueError(f"unknown time unit {unit!r} in {text!r}")
        total += float(number) * _UNITS[unit or "s"]
        pos = match.end()
        while pos < len(value) and value[pos].isspace():
            pos += 1
    return total


def format_seconds(seconds: float) -> str:
    """A short human form: ``100ms``, ``10s``, ``1min 30s``, ``infinity``."""
    if math.isinf(seconds):
        return "infinity"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    minutes, secs = divmod(seconds, 60)
    if minutes < 1:
        return f"{secs:g}s"
    hours, minutes = divmod(minutes, 60)
    parts = [f"{int(hours)}h"] if hours else []
    parts += [f"{int(minutes)}min"] if minutes else []
    parts += [f"{secs:g}s"] if secs else []
    return " ".join(parts)
