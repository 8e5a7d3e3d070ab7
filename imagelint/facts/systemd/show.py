"""Restart counters of systemd services, from ``systemctl show`` output, for the soak's attribution.

The output of the batched call that :func:`imagelint.probes.systemd.collect_restart_counters` makes
on the running host (or that a bundle recorded) is one ``Key=Value`` block per unit, blocks
separated by an empty line. ``NRestarts`` (systemd 235 and later) counts the automatic restarts of a unit. Two
snapshots, at the start and end of a soak, give each unit's restarts in between: a counter that went
*down* between them (the unit was unloaded and loaded again) is reported as unknown, never as
negative.

Where systemctl cannot talk to a manager (no systemd as PID 1, as in many containers), the source
is *absent*: :class:`RestartSnapshot` says so and why, nothing raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from imagelint.errors import ImageReadError
from imagelint.records import dataclass


@dataclass(frozen=True)
class UnitRestarts:
    unit: str
    n_restarts: int | None
    active_state: str | None
    sub_state: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "n_restarts": self.n_restarts,
            "active_state": self.active_state,
            "sub_state": self.sub_state,
        }


@dataclass(frozen=True)
class RestartSnapshot:
    """Restart counters of all loaded services at one moment, or why there are none."""

    wall: float
    available: bool
    reason: str | None = None
    units: dict[str, UnitRestarts] = field(default_factory=dict)
    booted: bool = True  # a systemd manager runs: counters that could not be read are missing data

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall": self.wall,
            "available": self.available,
            "reason": self.reason,
            "units": [u.to_dict() for u in self.units.values()],
        }


def parse_show_blocks(text: str) -> list[dict[str, str]]:
    """``systemctl show`` output: ``Key=Value`` lines, one block per unit, blank-line separated.

    Blocks without an ``Id`` are dropped. Shared by the soak's counters and ``audit --live``.
    """
    blocks: list[dict[str, str]] = []
    for block in text.split("\n\n"):
        props: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                props[key.strip()] = value.strip()
        if props.get("Id"):
            blocks.append(props)
    return blocks


def parse_systemctl_show(text: str, *, where: str = "systemctl show") -> dict[str, UnitRestarts]:
    """Parse ``systemctl show`` output (read from ``where``) into restart counters, by unit.

    An empty or missing ``NRestarts`` (systemd before 235) is unknown; any other value that is not
    a count of ASCII digits (``²`` passes ``isdigit()``, ``٣`` passes ``int()``) is ImageReadError:
    the output did not come from systemctl, or was altered."""
    units: dict[str, UnitRestarts] = {}
    for props in parse_show_blocks(text):
        unit = props["Id"]
        raw = props.get("NRestarts", "")
        if raw and not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
            raise ImageReadError(where, f"{unit[:80]!r}: NRestarts {raw[:40]!r} is not a count")
        n = int(raw) if raw else None
        units[unit] = UnitRestarts(unit, n, props.get("ActiveState") or None, props.get("SubState") or None)
    return units


@dataclass(frozen=True)
class RestartDelta:
    """How often a unit restarted between two snapshots. ``restarts`` is None when unknowable."""

    unit: str
    restarts: int | None
    start: int | None
    end: int | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "restarts": self.restarts,
            "start": self.start,
            "end": self.end,
            "note": self.note,
        }


def restart_deltas(start: RestartSnapshot, end: RestartSnapshot) -> list[RestartDelta]:
    """Units whose counter moved (or that appeared with restarts), most restarts first."""
    if not (start.available and end.available):
        return []
    out: list[RestartDelta] = []
    for unit, after in end.units.items():
        before = start.units.get(unit)
        b = before.n_restarts if before else None
        a = after.n_restarts
        if a is None:
            continue
        if before is None:
            if a > 0:
                out.append(RestartDelta(unit, a, None, a, "loaded during the soak; restarts since load"))
        elif b is None:
            continue
        elif a < b:
            out.append(RestartDelta(unit, None, b, a, "counter went back: the unit was reloaded"))
        elif a > b:
            out.append(RestartDelta(unit, a - b, b, a))
    out.sort(key=lambda d: (-(d.restarts or 0), d.unit))
    return out


def attribution_text(dying_delta: int | float, deltas: Sequence[RestartDelta], *, limit: int = 3) -> str:
    """'dying memcgs +212; ecs.service restarted 211 times in the same window'."""
    head = f"dying memcgs {dying_delta:+,.0f}"
    named = [d for d in deltas if d.restarts][:limit]
    if not named:
        return head + "; no service restarted in the same window"
    parts = [f"{d.unit} restarted {d.restarts:,} time{'s' if d.restarts != 1 else ''}" for d in named]
    return head + "; " + ", ".join(parts) + " in the same window"
