"""Restart counters read live: the absent case on this host, and a real crash-looping unit under
systemd 252 booted in a container (systemd-nspawn, the image's own systemd).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.facts.systemd.show import RestartSnapshot, attribution_text, restart_deltas
from imagelint.probes.systemd import collect_restart_counters
from tests.nspawn import booted
from tests.support import wait_for


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
    assert wait_for(lambda: "il-crash.service" in collect_restart_counters(prefix=prefix).units, 60)
    start = collect_restart_counters(prefix=prefix)
    t0 = time.monotonic()
    # at least two restarts between the snapshots, however loaded the machine (waited for, not slept)
    assert wait_for(lambda: _restarts(start, collect_restart_counters(prefix=prefix)) >= 2, 60)
    end = collect_restart_counters(prefix=prefix)
    elapsed = time.monotonic() - t0
    assert start.available and end.available
    deltas = restart_deltas(start, end)
    assert deltas and deltas[0].unit == "il-crash.service"
    # one restart per RestartSec at most, whatever the load: never more than one per 0.3 s
    assert 2 <= deltas[0].restarts <= elapsed / 0.3 + 1
    assert all(d.unit == "il-crash.service" for d in deltas if d.restarts)
    assert "il-crash.service restarted" in attribution_text(5, deltas)


def _restarts(start: RestartSnapshot, end: RestartSnapshot) -> int:
    return sum(d.restarts for d in restart_deltas(start, end) if d.unit == "il-crash.service")
