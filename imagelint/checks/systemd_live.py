"""Live check kinds (scope host): the running service manager's unit states, from one batched
``systemctl show`` (:class:`~imagelint.facts.systemd.live.LiveState`, a data source that
``imagelint audit --live`` supplies).

A host whose PID 1 is not systemd (``/run/systemd/system`` absent, as ``sd_booted()`` decides; the
collector records the same test) has no service manager: the rules' subject is absent, so they are
*not applicable*, with the reason, exactly as ``soak.unit_restarts`` (IL405) is in ``soak`` and in
``watch``'s judge (the project's rule: a subject simply absent is not applicable). A manager that runs
and does not answer, or a record that does not say whether one ran, is data that is there and was
not read: inconclusive, never "not applicable". See docs/soak.md ("Hosts without systemd").
"""

from __future__ import annotations

from typing import Annotated, Any

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation
from imagelint.checks.params import Param, UnitSelection
from imagelint.errors import ImageReadError
from imagelint.facts.systemd.live import LiveState, LiveUnit
from imagelint.records import dataclass


def _live(ctx: CheckContext) -> LiveState:
    live = ctx.source(LiveState)
    if live is None:
        raise NotApplicable("not a live run (use `imagelint audit --live` on the running host)")
    ctx.record("systemd_live", live.to_dict)
    if not live.available:
        reason = " ".join((live.reason or "no answer").split())
        if not live.booted:  # no manager at all: nothing to judge (as IL405 in soak and watch)
            raise NotApplicable(f"no systemd manager runs on this host: {reason}")
        raise ImageReadError("systemctl show", reason)  # a manager ran and was not read
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
