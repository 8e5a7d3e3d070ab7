"""Live check kinds (scope host): the running service manager's unit states, from one batched
``systemctl show`` (:class:`~imagelint.facts.systemd.live.LiveState`, a data source that
``imagelint audit --live`` supplies).

A live check that was asked for and cannot run (no systemd as PID 1, or a manager that does not
answer) is inconclusive, never "not applicable": the user asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation
from imagelint.checks.params import Param, UnitSelection
from imagelint.errors import ImageReadError
from imagelint.facts.systemd.live import LiveState, LiveUnit


def _live(ctx: CheckContext) -> LiveState:
    live = ctx.source(LiveState)
    if live is None:
        raise NotApplicable("not a live run (use `imagelint audit --live` on the running host)")
    ctx.record("systemd_live", live.to_dict)
    if not live.available:
        # the user asked for a live check that could not run: inconclusive, never "not applicable"
        reason = " ".join((live.reason or "no answer").split())
        where = "systemctl show" if live.booted else "/run/systemd/system"
        raise ImageReadError(where, reason)
    return live


def _live_evidence(u: LiveUnit) -> dict[str, Any]:
    return {
        "active_state": u.active_state,
        "sub_state": u.sub_state,
        "result": u.result,
        "n_restarts": u.n_restarts,
        "exec_main_status": u.exec_main_status,
        "unit_file_state": u.unit_file_state,
    }


_LIVE_VARS = {
    "unit": "the unit",
    "active_state": "ActiveState",
    "sub_state": "SubState",
    "result": "Result",
    "n_restarts": "NRestarts (automatic restarts since the unit was loaded)",
    "exec_main_status": "exit status of the main process",
    "unit_file_state": "UnitFileState (enabled, static...)",
}


@dataclass(frozen=True, kw_only=True)
class LiveRestartingParams(UnitSelection):
    min_restarts: Annotated[int, Param("NRestarts at or above which it fires", minimum=1)]
    auto_restart: Annotated[bool, Param("also fire for any unit in SubState auto-restart")] = True


@register
class LiveRestarting(CheckKind[LiveRestartingParams]):
    name = "systemd.live_restarting"
    summary = (
        "Live: fires for each service of the running manager that is waiting to restart (SubState "
        "auto-restart) or has restarted automatically at least `min_restarts` times."
    )
    parameters = LiveRestartingParams
    variables = dict(_LIVE_VARS)

    def evaluate(self, ctx: CheckContext, params: LiveRestartingParams) -> list[Observation]:
        live = _live(ctx)
        found = []
        for u in live.units.values():
            if not params.selects(u.unit):
                continue
            looping = params.auto_restart and u.sub_state == "auto-restart"
            if looping or (u.n_restarts or 0) >= params.min_restarts:
                found.append(Observation(u.unit, unit=u.unit, evidence=_live_evidence(u)))
        return found


@register
class LiveFailed(CheckKind[UnitSelection]):
    name = "systemd.live_failed"
    summary = "Live: fires for each service of the running manager in ActiveState failed."
    parameters = UnitSelection
    variables = dict(_LIVE_VARS)

    def evaluate(self, ctx: CheckContext, params: UnitSelection) -> list[Observation]:
        live = _live(ctx)
        return [
            Observation(u.unit, unit=u.unit, evidence=_live_evidence(u))
            for u in live.units.values()
            if u.active_state == "failed" and params.selects(u.unit)
        ]
