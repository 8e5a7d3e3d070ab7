"""Unit metrics: a real systemd (booted in a container) with a crash-looping service, seen by the watch
through one batched `systemctl show`; label cardinality capped; hostile unit names escaped."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from imagelint.facts.systemd.live import LiveState, parse_live
from imagelint.watch import metrics
from imagelint.watch.loop import Watcher, WatchSettings
from imagelint.watch.state import SourceStatus, WatchState
from imagelint.watch.units import MAX_LABELLED_UNITS, UnitTracker, UnitView
from tests.nspawn import booted_live
from tests.watch.procs import promtool

LOOP = "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=300ms\n"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def exposition(state: WatchState) -> str:
    return metrics.exposition(metrics.registry(lambda: state, process=False)).decode()


@pytest.fixture
def container(debian_rootfs: Path) -> Iterator[list[str]]:
    with booted_live(debian_rootfs) as prefix:
        yield prefix


@pytest.mark.root
@pytest.mark.slow
def test_a_crash_looping_unit_is_labelled_flagged_and_counted(container: list[str], tmp_path: Path) -> None:
    prefix = container
    subprocess.run(
        [*prefix, "sh", "-c", "cat > /run/systemd/system/il-loop.service"], input=LOOP.encode(), check=True
    )
    subprocess.run([*prefix, "systemctl", "daemon-reload"], check=True)
    subprocess.run([*prefix, "systemctl", "start", "--no-block", "il-loop.service"], check=True)
    settings = WatchSettings(
        units_every=0.5, interval=0.5, systemctl_prefix=tuple(prefix), journal_dir=str(tmp_path), window=600
    )
    watcher = Watcher(settings)
    deadline = time.monotonic() + 60
    while True:
        state = watcher.step()
        assert state.sources["systemd"].up, state.sources["systemd"].reason
        shown = {u.unit: u for u in state.units}
        if "il-loop.service" in shown and shown["il-loop.service"].restarts_in_window >= 3:
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)
    loop = shown["il-loop.service"]
    assert loop.restart_loop and loop.n_restarts >= 3
    assert state.units_loaded > 20  # every loaded service, from one call
    assert all(name.startswith("il-") for name in shown), shown  # the booted image itself is healthy
    text = exposition(state)
    m = samples(text)
    assert m[("imagelint_unit_restarts_total", (("unit", "il-loop.service"),))] == loop.n_restarts
    assert m[("imagelint_unit_restart_loop", (("unit", "il-loop.service"),))] == 1.0
    states = [k for k in m if k[0] == "imagelint_unit_state"]
    assert len(states) == 1 and dict(states[0][1])["unit"] == "il-loop.service"
    assert m[("imagelint_units_looping", ())] == 1.0
    checked = promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _failed(n: int) -> LiveState:
    blocks = [
        f"Id=bad-{i:02d}.service\nActiveState=failed\nSubState=failed\nResult=exit-code\nNRestarts={i}\n"
        for i in range(n)
    ]
    blocks.append("Id=ok.service\nActiveState=active\nSubState=running\nResult=success\nNRestarts=0\n")
    return LiveState(0.0, True, True, None, parse_live("\n".join(blocks)))


def test_unit_labels_are_capped_with_an_overflow_count() -> None:
    tracker = UnitTracker(3600)
    sel = tracker.update(_failed(50), now=0.0)
    assert len(sel.shown) == MAX_LABELLED_UNITS and sel.overflow == 50 - MAX_LABELLED_UNITS
    assert sel.loaded == 51 and "ok.service" not in {u.unit for u in sel.shown}
    state = WatchState(
        0.0, sources={"systemd": SourceStatus(True)}, units=sel.shown, units_overflow=sel.overflow
    )
    m = samples(exposition(state))
    labelled = {dict(k[1])["unit"] for k in m if k[0] == "imagelint_unit_restarts_total"}
    assert len(labelled) == MAX_LABELLED_UNITS
    assert m[("imagelint_units_overflow", ())] == 30.0


def test_restarts_in_window_and_loop_flag_follow_the_counter() -> None:
    tracker = UnitTracker(60, loop_restarts=3)

    def at(now: float, n: int, sub: str = "running") -> UnitView | None:
        text = f"Id=x.service\nActiveState=active\nSubState={sub}\nNRestarts={n}\n"
        shown = tracker.update(LiveState(now, True, True, None, parse_live(text)), now).shown
        return shown[0] if shown else None

    assert at(0, 5) is None  # a counter at 5 from before the window is not trouble
    assert at(10, 7).restarts_in_window == 2  # type: ignore[union-attr]
    assert at(20, 8).restart_loop  # type: ignore[union-attr]
    assert at(100, 8) is None  # no restart within the last 60 s
    assert at(110, 1) is None  # reloaded: the counter went back, history starts over
    assert at(120, 1, "auto-restart").restart_loop  # type: ignore[union-attr]


def test_hostile_unit_names_are_escaped_in_the_exposition() -> None:
    name = 'evil"\\\nunit.service'
    view = UnitView(name, "failed", "failed", 3, 3, True)
    state = WatchState(0.0, sources={"systemd": SourceStatus(True)}, units=(view,))
    text = exposition(state)
    assert 'unit="evil\\"\\\\\\nunit.service"' in text
    m = samples(text)
    assert m[("imagelint_unit_restart_loop", (("unit", name),))] == 1.0
    checked = promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
