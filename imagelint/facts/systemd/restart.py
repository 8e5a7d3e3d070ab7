"""A service's effective restart policy: ``Restart=``, ``RestartSec=`` and its start limit.

Each value is the unit's own (last assignment of its fragment and drop-ins, an empty one resetting
it), else the manager's default from the image's ``system.conf`` (:mod:`.manager`). Whether the
start limit can ever stop an auto-restart loop follows systemd 252's rate limit (see
:func:`never_trips`). One computation for the rule that flags restart loops
(``systemd.restart_unbounded``) and for the report's inventory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagelint.facts.systemd.timespan import format_seconds, parse_timespan

if TYPE_CHECKING:
    from imagelint.facts.systemd.index import Unit
    from imagelint.facts.systemd.manager import ManagerDefaults, Setting
    from imagelint.facts.systemd.model import Assignment

INTERVAL_KEYS = (
    ("Unit", "StartLimitIntervalSec"),
    ("Unit", "StartLimitInterval"),
    ("Service", "StartLimitInterval"),
)
BURST_KEYS = (("Unit", "StartLimitBurst"), ("Service", "StartLimitBurst"))


@dataclass(frozen=True)
class Value:
    """One effective setting: its value, its text as written, and where it is set."""

    value: float
    text: str
    source: str


@dataclass(frozen=True)
class RestartPolicy:
    """The effective restart policy of one loaded service."""

    restart: Assignment | None  # the effective Restart= line (None: Restart=no by default)
    restart_sec: Value
    interval: Value
    burst: Value
    errors: tuple[str, ...] = ()  # invalid values systemd ignores (the default applies instead)

    @property
    def restarts(self) -> bool:
        if self.restart is None or self.restart.value == "no":
            return False
        return not math.isinf(self.restart_sec.value)

    @property
    def never_trips(self) -> str | None:
        """Why the start limit can never stop this service's restart loop, or None (it can, or no loop)."""
        if not self.restarts:
            return None
        return never_trips(self.restart_sec.value, self.interval.value, int(self.burst.value))

    def to_dict(self) -> dict[str, Any]:
        why = self.never_trips
        return {
            "restart": self.restart.value if self.restart is not None else "no",
            "restart_sec": _finite(self.restart_sec.value),
            "start_limit_burst": int(self.burst.value),
            "start_limit_interval_sec": _finite(self.interval.value),
            "limit_can_trip": why is None,
            "why": why,
        }


def _finite(seconds: float) -> float | None:
    """Seconds for JSON: None for infinity (JSON has no such number)."""
    return None if math.isinf(seconds) else seconds


def _setting(default: Setting) -> Value:
    return Value(default.value, default.text, default.source)


def unit_value(
    unit: Unit, keys: tuple[tuple[str, str], ...], parse: Callable[[str], float]
) -> tuple[Value | None, str | None]:
    """The last assignment of any of ``keys`` (section, key) in file order; (None, error) if invalid."""
    last: Assignment | None = None
    for a in unit.assignments:
        if (a.section, a.key) in keys:
            last = None if a.value == "" else a
    if last is None:
        return None, None
    try:
        return Value(parse(last.value), last.value, f"{last.path}:{last.line}"), None
    except ValueError:
        return None, f"{last.key}={last.value} at {last.path}:{last.line} is invalid; systemd ignores it"


def restart_policy(unit: Unit, defaults: ManagerDefaults) -> RestartPolicy:
    """The effective policy of ``unit`` (meaningful for services; others get the defaults)."""
    restart = unit.get("Service", "Restart")
    sec, err1 = unit_value(unit, (("Service", "RestartSec"),), parse_timespan)
    interval, err2 = unit_value(unit, INTERVAL_KEYS, parse_timespan)
    burst, err3 = unit_value(unit, BURST_KEYS, int)
    return RestartPolicy(
        restart[-1] if restart else None,
        sec or _setting(defaults.restart_sec),
        interval or _setting(defaults.start_limit_interval),
        burst or _setting(defaults.start_limit_burst),
        tuple(e for e in (err1, err2, err3) if e),
    )


def never_trips(restart_sec: float, interval: float, burst: int) -> str | None:
    """Why the start limit can never stop an auto-restart loop, or None if it can.

    systemd 252's ratelimit: the window opens at the first start; a start is refused when it is
    start number burst+1 within ``interval`` of the window's opening, and the window reopens at the
    first start after that. Restarts come RestartSec apart (plus the time the process runs, taken as
    0: the best case for the limit), so start burst+1 comes at burst×RestartSec. If that is not
    before the window closes, the limit never trips (any run time only pushes it further out).
    """
    if interval <= 0:
        return "StartLimitIntervalSec=0 disables the start limit"
    if burst <= 0:
        return "StartLimitBurst=0 disables the start limit"
    span = burst * restart_sec
    if span >= interval:
        return (
            f"{burst + 1} starts take at least {burst}×{format_seconds(restart_sec)} = "
            f"{format_seconds(span)}, not less than the {format_seconds(interval)} interval"
        )
    return None
