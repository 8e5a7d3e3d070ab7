"""Restart counters: the parser on real systemd 252 output, the absent case on this host, and a real
crash-looping unit under systemd 252 booted in a container (systemd-nspawn, the image's own systemd).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.facts.systemd.show import (
    RestartSnapshot,
    UnitRestarts,
    attribution_text,
    collect_restart_counters,
    parse_systemctl_show,
    restart_deltas,
)
from tests.nspawn import booted

DATA = Path(__file__).resolve().parent.parent / "data" / "cgroup"


def test_parse_real_systemctl_show_output() -> None:
    """Recorded from ``systemctl show --all --property=... -- '*.service'`` in a booted Debian 12."""
    text = (DATA / "systemctl-show-252.txt").read_text()
    units = parse_systemctl_show(text)
    assert len(units) == text.count("Id=") == 67
    assert all(u.unit.endswith(".service") for u in units.values())
    assert all(u.n_restarts == 0 for u in units.values())
    assert units["dbus.service"] == UnitRestarts("dbus.service", 0, "active", "running")
    assert {u.active_state for u in units.values()} >= {"active", "inactive"}


def test_systemctl_on_this_host_is_read_or_reported_absent() -> None:
    snap = collect_restart_counters()
    if Path("/run/systemd/system").exists():  # the host runs systemd (sd_booted): it must be read
        assert snap.available and snap.units, snap.reason
    else:
        assert not snap.available and snap.units == {}
        assert snap.reason  # says why, e.g. "System has not been booted with systemd..."
    missing = collect_restart_counters(systemctl="no-such-systemctl-imagelint")
    assert not missing.available and "not found" in (missing.reason or "")
    assert restart_deltas(snap, snap) == []


def test_deltas_and_attribution_from_snapshots() -> None:
    def snap(**counts: int | None) -> RestartSnapshot:
        units = {
            f"{k}.service": UnitRestarts(f"{k}.service", v, "active", "running") for k, v in counts.items()
        }
        return RestartSnapshot(0.0, True, None, units)

    start = snap(ecs=4, sshd=0, cron=9, gone=1)
    end = snap(ecs=215, sshd=0, cron=2, new=3)
    deltas = restart_deltas(start, end)
    assert [(d.unit, d.restarts) for d in deltas] == [
        ("ecs.service", 211),
        ("new.service", 3),
        ("cron.service", None),
    ]
    text = attribution_text(212, deltas)
    assert text == (
        "dying memcgs +212; ecs.service restarted 211 times, new.service restarted 3 times in the same window"
    )
    assert attribution_text(0, []) == "dying memcgs +0; no service restarted in the same window"


# ------------------------------------------------------------------------------------------------
# against systemd 252 itself


@pytest.fixture
def booted_container(debian_rootfs: Path) -> Iterator[list[str]]:
    """Boot the Debian image with its systemd as PID 1 (read-only image, changes in a tmpfs overlay).

    Yields the command prefix that runs a program in the container's namespaces.
    """
    with booted(
        debian_rootfs, volatile=True, ready=lambda p: collect_restart_counters(prefix=p).available
    ) as prefix:
        yield prefix


@pytest.mark.root
@pytest.mark.slow
def test_crash_looping_unit_is_counted_by_real_systemd(booted_container: list[str]) -> None:
    prefix = booted_container
    unit = (
        "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=300ms\n"
    )
    subprocess.run(
        [*prefix, "sh", "-c", "cat > /run/systemd/system/il-crash.service"], input=unit.encode(), check=True
    )
    subprocess.run([*prefix, "systemctl", "daemon-reload"], check=True)
    subprocess.run([*prefix, "systemctl", "start", "--no-block", "il-crash.service"], check=True)
    time.sleep(1.0)
    start = collect_restart_counters(prefix=prefix)
    t0 = time.monotonic()
    time.sleep(3.0)
    end = collect_restart_counters(prefix=prefix)
    elapsed = time.monotonic() - t0
    assert start.available and end.available
    assert "il-crash.service" in start.units
    deltas = restart_deltas(start, end)
    assert deltas and deltas[0].unit == "il-crash.service"
    # one restart per RestartSec plus the time /bin/false takes: a few per second, not more than 1/0.3 s
    assert 2 <= deltas[0].restarts <= elapsed / 0.3 + 1
    assert all(d.unit == "il-crash.service" for d in deltas if d.restarts)
    assert "il-crash.service restarted" in attribution_text(5, deltas)
