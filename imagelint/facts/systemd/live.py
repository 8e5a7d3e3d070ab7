"""Live unit state of the running host, for ``imagelint audit --live``, from ``systemctl show`` output.

The output of one batched call over every loaded service (made by
:func:`imagelint.probes.systemd.collect_live_state`, or recorded in a bundle), parsed with the
same block parser as the soak's restart counters (:mod:`imagelint.facts.systemd.show`). Where no
systemd runs as PID 1 the state is *not booted*: no manager, so the live rules are not applicable
(as the soak's restart rule); a systemd that is there but does not answer makes them inconclusive
(an error outcome, with the reason on one line). See :mod:`imagelint.checks.systemd_live`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, NamedTuple

from imagelint.records import dataclass


def _int(text: str | None) -> int | None:
    """A decimal count as systemctl prints it; anything else (``[not set]``, ``٣``, ``²``) is unknown."""
    if text is None or not (text.isascii() and text.lstrip("-").isdigit()):
        return None
    return int(text)


class LiveUnit(NamedTuple):
    unit: str
    active_state: str | None
    sub_state: str | None
    result: str | None
    n_restarts: int | None
    exec_main_status: int | None
    unit_file_state: str | None

    @classmethod
    def from_props(cls, props: dict[str, str]) -> LiveUnit:
        return cls(
            props["Id"],
            props.get("ActiveState") or None,
            props.get("SubState") or None,
            props.get("Result") or None,
            _int(props.get("NRestarts")),
            _int(props.get("ExecMainStatus")),
            props.get("UnitFileState") or None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "active_state": self.active_state,
            "sub_state": self.sub_state,
            "result": self.result,
            "n_restarts": self.n_restarts,
            "exec_main_status": self.exec_main_status,
            "unit_file_state": self.unit_file_state,
        }


@dataclass(frozen=True)
class LiveState:
    """Every loaded service of the running manager at one moment, or why there is none."""

    wall: float
    available: bool
    booted: bool  # a systemd manager runs (or was reached through the prefix)
    reason: str | None = None
    units: dict[str, LiveUnit] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall": self.wall,
            "available": self.available,
            "booted": self.booted,
            "reason": self.reason,
            "units": [u.to_dict() for u in self.units.values()],
        }


def parse_live(text: str) -> dict[str, LiveUnit]:
    # here: an offline audit imports this module (a kind it loads names LiveState), never parses
    from imagelint.facts.systemd.show import parse_show_blocks

    return {props["Id"]: LiveUnit.from_props(props) for props in parse_show_blocks(text)}
