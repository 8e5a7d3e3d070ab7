"""Which services to show, from one batched ``systemctl show`` per pass, and their restart-loop flag.

Per-unit label values are bounded: a unit is labelled only while it is *in trouble* (failed, waiting
to auto-restart, or its ``NRestarts`` rose within the window), at most ``cap`` of them (default
``MAX_LABELLED_UNITS``), looping units first, then by restarts in the window; how many more qualified
is reported as an overflow count. A unit is a *restart loop* when it restarted at least
``loop_restarts`` times within the window, or systemd is about to restart it again (SubState
``auto-restart``). A counter that went down (the unit was reloaded) starts its history over.
"""

from __future__ import annotations

from collections import deque

from imagelint.facts.systemd.live import LiveState, LiveUnit
from imagelint.facts.systemd.show import RestartSnapshot, UnitRestarts
from imagelint.records import dataclass

MAX_LABELLED_UNITS = 20
DEFAULT_LOOP_RESTARTS = 3


@dataclass(frozen=True)
class UnitView:
    unit: str
    active_state: str
    sub_state: str
    n_restarts: int
    restarts_in_window: int
    restart_loop: bool


@dataclass(frozen=True)
class UnitSelection:
    shown: tuple[UnitView, ...]
    overflow: int  # units in trouble left out by the cap
    loaded: int  # services systemd reported
    looping: int  # restart loops, shown or not


class UnitTracker:
    def __init__(
        self,
        window_seconds: float,
        *,
        cap: int = MAX_LABELLED_UNITS,
        loop_restarts: int = DEFAULT_LOOP_RESTARTS,
    ) -> None:
        self.window_seconds = window_seconds
        self.cap = cap
        self.loop_restarts = loop_restarts
        self._history: dict[str, deque[tuple[float, int]]] = {}

    def _restarts_in_window(self, unit: LiveUnit, now: float) -> int:
        n = unit.n_restarts
        if n is None:
            self._history.pop(unit.unit, None)
            return 0
        hist = self._history.get(unit.unit)
        if hist is None or n < hist[-1][1]:
            hist = self._history[unit.unit] = deque([(now, n)])
        elif n != hist[-1][1]:
            hist.append((now, n))
        # keep one point at or before the window's start as the baseline
        while len(hist) > 1 and hist[1][0] <= now - self.window_seconds:
            hist.popleft()
        return n - hist[0][1]

    def update(self, state: LiveState, now: float) -> UnitSelection:
        trouble: list[UnitView] = []
        for name in [u for u in self._history if u not in state.units]:
            del self._history[name]
        for unit in state.units.values():
            in_window = self._restarts_in_window(unit, now)
            looping = in_window >= self.loop_restarts or unit.sub_state == "auto-restart"
            if looping or in_window > 0 or unit.active_state == "failed":
                trouble.append(
                    UnitView(
                        unit.unit,
                        unit.active_state or "unknown",
                        unit.sub_state or "unknown",
                        unit.n_restarts or 0,
                        in_window,
                        looping,
                    )
                )
        trouble.sort(key=lambda v: (not v.restart_loop, -v.restarts_in_window, v.unit))
        shown = tuple(trouble[: self.cap])
        looping_n = sum(1 for v in trouble if v.restart_loop)
        return UnitSelection(shown, len(trouble) - len(shown), len(state.units), looping_n)


def restart_snapshot(state: LiveState) -> RestartSnapshot:
    """The soak's restart snapshot, from the same ``systemctl show`` (for judging the soak rules)."""
    units = {
        u.unit: UnitRestarts(u.unit, u.n_restarts, u.active_state, u.sub_state) for u in state.units.values()
    }
    return RestartSnapshot(state.wall, state.available, state.reason, units, booted=state.booted)
