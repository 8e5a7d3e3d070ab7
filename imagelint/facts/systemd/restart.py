"""A service's effective restart policy, and whether its start limit can ever stop a restart loop.

The values come from the unit (its last assignment in file order, drop-ins included; an empty
assignment resets), else from the manager's defaults in the image's ``system.conf``
(:mod:`imagelint.facts.systemd.manager`). An invalid value is ignored, as systemd ignores it, and
said in :attr:`RestartPolicy.warnings`.

systemd 252's ratelimit: the window opens at the first start; a start is refused when it is start
number burst+1 within ``interval`` of the window's opening, and the window reopens at the first
start after that. Restarts come RestartSec apart (plus the time the process runs, taken as 0: the
best case for the limit), so start burst+1 comes at burst×RestartSec. If that is not before the
window closes, the limit never trips (any run time only pushes it further out). This was settled
against a real systemd 252 in a booted container.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, NamedTuple

from imagelint.facts.systemd import names
from imagelint.facts.systemd.model import Assignment
from imagelint.facts.systemd.timespan import format_seconds, parse_timespan
from imagelint.records import dataclass

if TYPE_CHECKING:
    from imagelint.facts.systemd.index import Unit
    from imagelint.facts.systemd.manager import ManagerDefaults, Setting

_RESTART_SEC = (("Service", "RestartSec"),)
_INTERVAL = (
    ("Unit", "StartLimitIntervalSec"),
    ("Unit", "StartLimitInterval"),
    ("Service", "StartLimitInterval"),
)
_BURST = (("Unit", "StartLimitBurst"), ("Service", "StartLimitBurst"))


class Value(NamedTuple):
    """One effective value: the number, the text as written, and where it is set."""

    value: float
    text: str
    source: str


@dataclass(frozen=True)
class RestartPolicy:
    """The effective ``Restart=`` of a loaded service and the start limit that bounds it."""

    restart: Assignment  # the Restart= line in force
    restart_sec: Value
    interval: Value
    burst: Value
    never_trips: str | None  # why the start limit can never stop the loop; None if it can
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (unit, invalid value ignored)

    @property
    def restarts_per_day(self) -> str:
        return (
            f"{86400 / self.restart_sec.value:,.0f}" if self.restart_sec.value > 0 else "unbounded (no delay)"
        )

    @property
    def start_limit(self) -> str:
        b, i = self.burst, self.interval
        source = b.source if b.source == i.source else f"{b.source}; {i.source}"
        return f"{int(b.value)} starts in {format_seconds(i.value)} ({source})"


def restart_policy(unit: Unit, defaults: ManagerDefaults) -> RestartPolicy | None:
    """The policy of a loaded service that restarts at all (Restart= other than no); None otherwise."""
    unit_id = unit.unit_id or unit.name
    if names.unit_type(unit_id) != "service" or unit.loaded is None or unit.loaded.status != "loaded":
        return None
    restart = unit.get("Service", "Restart")
    if not restart or restart[-1].value == "no":
        return None
    warnings: list[tuple[str, str]] = []
    sec = _setting(unit, _RESTART_SEC, parse_timespan, warnings) or _default(defaults.restart_sec)
    interval = _setting(unit, _INTERVAL, parse_timespan, warnings) or _default(defaults.start_limit_interval)
    burst = _setting(unit, _BURST, int, warnings) or _default(defaults.start_limit_burst)
    if math.isinf(sec.value):
        return None  # RestartSec=infinity: never restarts
    why = never_trips(sec.value, interval.value, int(burst.value))
    return RestartPolicy(restart[-1], sec, interval, burst, why, warnings)


def never_trips(restart_sec: float, interval: float, burst: int) -> str | None:
    """Why the start limit can never stop an auto-restart loop, or None if it can (see the module)."""
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


def _default(setting: Setting) -> Value:
    return Value(setting.value, setting.text, setting.source)


def _setting(
    unit: Unit,
    keys: tuple[tuple[str, str], ...],
    parse: Callable[[str], float],
    warnings: list[tuple[str, str]],
) -> Value | None:
    """The last assignment of any of ``keys`` (section, key) in file order; None if unset or invalid."""
    last: Assignment | None = None
    for a in unit.assignments:
        if (a.section, a.key) in keys:
            last = None if a.value == "" else a
    if last is None:
        return None
    try:
        return Value(parse(last.value), last.value, f"{last.path}:{last.line}")
    except ValueError:
        warnings.append(
            (
                unit.unit_id or unit.name,
                f"{last.key}={last.value} at {last.path}:{last.line} is invalid; systemd ignores it",
            )
        )
        return None
