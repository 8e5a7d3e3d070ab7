"""Restart counters: the parser on real systemd 252 output, deltas between snapshots, attribution."""

from __future__ import annotations

from pathlib import Path

from imagelint.facts.systemd.show import (
    RestartSnapshot,
    UnitRestarts,
    attribution_text,
    parse_systemctl_show,
    restart_deltas,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "cgroup"


def test_parse_real_systemctl_show_output() -> None:
    """Recorded from ``systemctl show --all --property=... -- '*.service'`` in a booted Debian 12."""
    text = (DATA / "systemctl-show-252.txt").read_text()
    units = parse_systemctl_show(text)
    assert len(units) == text.count("Id=") == 67
    assert all(u.unit.endswith(".service") for u in units.values())
    assert all(u.n_restarts == 0 for u in units.values())
    assert units["dbus.service"] == UnitRestarts("dbus.service", 0, "active", "running")
    assert {u.active_state for u in units.values()} >= {"active", "inactive"}


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
