"""Live unit state of the running host, for ``imagelint audit --live``.

One batched call reads every loaded service (the same call and parser as the soak's restart
counters, :mod:`imagelint.facts.systemd.show`)::

    systemctl show --no-pager --all \\
        --property=Id,ActiveState,SubState,Result,NRestarts,ExecMainStatus,UnitFileState -- '*.service'

``prefix`` runs systemctl through another command (``nsenter -t PID -m -p ...``) to ask a
manager in other namespaces, as the tests do with a container booted by systemd-nspawn.
Where no systemd runs as PID 1 (``/run/systemd/system`` absent, as ``sd_booted()`` decides) the
state is *not booted*; that, like a systemd that is there but does not answer, makes the live rules
inconclusive (an error outcome, with the reason on one line): the user asked for a live check that
could not run, which is not the same as one that does not apply.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from imagelint.facts.systemd.show import DEFAULT_TIMEOUT, parse_show_blocks, run_systemctl_show

PROPERTIES = ("Id", "ActiveState", "SubState", "Result", "NRestarts", "ExecMainStatus", "UnitFileState")


def _int(text: str | None) -> int | None:
    """A decimal count as systemctl prints it; anything else (``[not set]``, ``٣``, ``²``) is unknown."""
    if text is None or not (text.isascii() and text.lstrip("-").isdigit()):
        return None
    return int(text)


@dataclass(frozen=True)
class LiveUnit:
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
    return {props["Id"]: LiveUnit.from_props(props) for props in parse_show_blocks(text)}


def collect_live_state(
    *,
    prefix: Sequence[str] = (),
    systemctl: str = "systemctl",
    timeout: float = DEFAULT_TIMEOUT,
) -> LiveState:
    """Ask the running manager once; never raises (an unusable systemctl is reported in the state)."""
    wall = time.time()
    booted = bool(prefix) or os.path.isdir("/run/systemd/system")
    out, reason = run_systemctl_show(PROPERTIES, systemctl=systemctl, prefix=prefix, timeout=timeout)
    if out is None:
        if not booted:
            reason = f"this host was not booted with systemd (no /run/systemd/system); {reason}"
        return LiveState(wall, False, booted, reason)
    return LiveState(wall, True, True, None, parse_live(out))
