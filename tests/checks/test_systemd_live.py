"""Live mode: the batched `systemctl show` collector and the host rules, against systemd 252 booted in a
container (systemd-nspawn), and the offline restart rule's verdict checked against what that systemd does."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.facts.systemd.live import LiveState, parse_live
from imagelint.probes.systemd import collect_live_state
from imagelint.report import Outcome
from imagelint.rulepacks import Scope, builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.nspawn import booted_live
from tests.support import build_tree

PACKS = load_packs([], builtin=builtin_pack_paths())

SHOW = """Id=ecs.service
ActiveState=activating
SubState=auto-restart
Result=exit-code
NRestarts=212
ExecMainStatus=1
UnitFileState=enabled

Id=ok.service
ActiveState=active
SubState=running
Result=success
NRestarts=0
ExecMainStatus=0
UnitFileState=static

Id=broken.service
ActiveState=failed
SubState=failed
Result=start-limit-hit
NRestarts=4
ExecMainStatus=1
UnitFileState=disabled
"""

# Start limit 3 in 2 s. LOOP restarts every 0.9 s: 3 × 0.9 s = 2.7 s ≥ 2 s, so the limit never trips
# (a "(burst-1) × RestartSec" reading would say 1.8 s < 2 s, it trips: real systemd settles it).
# TRIP restarts every 0.4 s: 3 × 0.4 s = 1.2 s < 2 s, its fourth start is refused.
LIMITS = "[Unit]\nStartLimitIntervalSec=2\nStartLimitBurst=3\n"
LOOP = LIMITS + "[Service]\nExecStart=/bin/false\nRestart=on-failure\nRestartSec=900ms\n"
TRIP = LIMITS + "[Service]\nExecStart=/bin/false\nRestart=on-failure\nRestartSec=400ms\n"


def _run(target_root: Path, live: LiveState, select: list[str]) -> tuple[dict[str, Outcome], list, list]:
    settings = RunSettings(scopes=(Scope.IMAGE, Scope.HOST), sources=(live,))
    report = audit(RootfsTarget(target_root), PACKS, Config(select=select), settings)
    return {r.rule_id: r.outcome for r in report.rules}, report.findings, report.errors


def test_parse_and_rules_on_recorded_output(tmp_path: Path) -> None:
    units = parse_live(SHOW)
    assert units["ecs.service"].n_restarts == 212 and units["ecs.service"].sub_state == "auto-restart"
    assert units["broken.service"].result == "start-limit-hit"
    live = LiveState(0.0, True, True, None, units)
    root = build_tree(tmp_path / "r", {"/etc/hostname": "x\n"})
    _outcomes, findings, _ = _run(root, live, ["IL211", "IL212"])
    got = {(f.rule_id, f.unit) for f in findings}
    assert got == {("IL211", "ecs.service"), ("IL211", "broken.service"), ("IL212", "broken.service")}
    msg = next(f.message for f in findings if f.rule_id == "IL211" and f.unit == "ecs.service")
    assert "activating/auto-restart with 212 automatic restarts" in msg


def test_an_unreachable_manager_is_inconclusive_a_host_without_one_not_applicable(tmp_path: Path) -> None:
    """A manager that runs and cannot be read is missing data (the run cannot pass); a host whose PID 1
    is not systemd has no manager, so no subject: not applicable, as IL405 in soak and watch
    (tests/test_no_systemd.py runs all three commands on such a host)."""
    root = build_tree(tmp_path / "r", {"/etc/hostname": "x\n"})
    broken = collect_live_state(systemctl="/nonexistent/systemctl", prefix=["env"])
    assert not broken.available and broken.booted and broken.reason
    outcomes, _findings, errors = _run(root, broken, ["IL211", "IL212"])
    assert outcomes["IL211"] is outcomes["IL212"] is Outcome.ERROR and errors
    absent = LiveState(0.0, False, False, "this host was not booted with systemd")
    outcomes, _, errors = _run(root, absent, ["IL211", "IL212"])
    assert outcomes["IL211"] is outcomes["IL212"] is Outcome.NOT_APPLICABLE and not errors


def test_live_needs_the_host_root() -> None:
    from tests.support import run_cli

    proc = run_cli("audit", "/tmp", "--live")
    assert proc.returncode == 2 and "--live audits the running host" in proc.stderr


@pytest.fixture
def container(debian_rootfs: Path) -> Iterator[list[str]]:
    with booted_live(debian_rootfs) as prefix:
        yield prefix


@pytest.mark.root
@pytest.mark.slow
def test_live_rules_against_a_booted_systemd(container: list[str], tmp_path: Path) -> None:
    prefix = container
    for name, text in (("il-loop.service", LOOP), ("il-trip.service", TRIP)):
        subprocess.run(
            [*prefix, "sh", "-c", f"cat > /run/systemd/system/{name}"], input=text.encode(), check=True
        )
    subprocess.run([*prefix, "systemctl", "daemon-reload"], check=True)
    subprocess.run(
        [*prefix, "systemctl", "start", "--no-block", "il-loop.service", "il-trip.service"], check=True
    )
    deadline = time.monotonic() + 30
    while True:
        live = collect_live_state(prefix=prefix)
        assert live.available, live.reason
        loop, trip = live.units.get("il-loop.service"), live.units.get("il-trip.service")
        if loop and trip and (loop.n_restarts or 0) >= 4 and trip.active_state == "failed":
            break
        assert time.monotonic() < deadline, (loop, trip)
        time.sleep(0.5)
    assert loop.active_state in ("activating", "inactive") and loop.result == "exit-code"
    # systemd 252 leaves Result=exit-code when the limit trips during auto-restart (it logs "Start
    # request repeated too quickly." with no MESSAGE_ID, then UNIT_RESULT=exit-code, not start-limit-hit)
    assert trip.result in ("exit-code", "start-limit-hit"), trip
    # starts 1-3 allowed in the window; restart 3 (start 4 = burst+1) is refused, NRestarts counts it
    assert trip.n_restarts == 3, trip
    assert len(live.units) > 20  # every loaded service, from one call

    root = build_tree(tmp_path / "r", {"/etc/hostname": "x\n"})
    _outcomes, findings, errors = _run(root, live, ["IL211", "IL212"])
    assert not errors
    got = {(f.rule_id, f.unit) for f in findings}
    assert ("IL211", "il-loop.service") in got and ("IL212", "il-trip.service") in got
    assert ("IL212", "il-loop.service") not in got
    assert all(u.startswith("il-") for _, u in got), got  # the booted image itself is healthy

    # the offline rule predicts exactly this: LOOP can never trip its limit, TRIP can
    image = build_tree(
        tmp_path / "image",
        {
            "/bin/false": {"content": "#!/bin/sh\nexit 1\n", "mode": "0755"},
            "/usr/lib/systemd/system/il-loop.service": LOOP + "[Install]\nWantedBy=multi-user.target\n",
            "/usr/lib/systemd/system/il-trip.service": TRIP + "[Install]\nWantedBy=multi-user.target\n",
            "/etc/systemd/system/multi-user.target.wants/il-loop.service": {
                "link": "/usr/lib/systemd/system/il-loop.service"
            },
            "/etc/systemd/system/multi-user.target.wants/il-trip.service": {
                "link": "/usr/lib/systemd/system/il-trip.service"
            },
        },
    )
    report = audit(RootfsTarget(image), PACKS, Config(select=["IL202"]), RunSettings())
    assert [f.unit for f in report.findings] == ["il-loop.service"]
    assert "3 starts in 2s" in report.findings[0].message


@pytest.mark.parametrize(
    ("shown", "count"), [("7", 7), ("0", 0), ("٣", None), ("²", None), ("[not set]", None)]
)
def test_restart_counts_are_ascii_decimals_as_systemctl_prints_them(shown: str, count: int | None) -> None:
    """int() reads '٣' as 3: a forged count in a host's answer must be unknown, not a number."""
    units = parse_live(f"Id=x.service\nActiveState=active\nNRestarts={shown}\nExecMainStatus={shown}\n")
    assert (units["x.service"].n_restarts, units["x.service"].exec_main_status) == (count, count)
