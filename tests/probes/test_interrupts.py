"""NIC queue interrupts read live: this machine's /proc/interrupts and sysfs, and an ENA-shaped sysfs tree."""

from __future__ import annotations

import os
from pathlib import Path

from imagelint.facts.interrupts import parse_interrupts
from imagelint.probes.interrupts import nic_irqs, read_interrupts
from tests.facts.interrupts_text import ENA


def _msi_irqs(iface: str) -> set[str]:
    found: set[str] = set()
    for d in (f"/sys/class/net/{iface}/device/msi_irqs", f"/sys/class/net/{iface}/device/../msi_irqs"):
        if os.path.isdir(d):
            found.update(os.listdir(d))
    return found


def test_this_machines_nics_map_to_their_own_msi_irqs() -> None:
    rows = read_interrupts()
    assert rows is not None and rows
    cpus = {c for row in rows.values() for c in row.counts}
    assert cpus == set(range(len(cpus)))  # one column per online CPU, from the header
    irqs = nic_irqs(rows)
    physical = [i for i in os.listdir("/sys/class/net") if os.path.exists(f"/sys/class/net/{i}/device")]
    assert sorted(irqs) == sorted(physical)
    for iface, numbers in irqs.items():
        msi = _msi_irqs(iface)
        if msi:
            assert numbers and set(numbers) <= msi | set(rows), (iface, numbers, msi)


def test_ena_queues_by_sysfs_and_name(tmp_path: Path) -> None:
    device = tmp_path / "devices" / "0000:00:05.0"
    (device / "msi_irqs").mkdir(parents=True)
    for irq in ("24", "25", "26"):
        (device / "msi_irqs" / irq).mkdir()
    (tmp_path / "net" / "ens5").mkdir(parents=True)
    (tmp_path / "net" / "ens5" / "device").symlink_to(device)
    (tmp_path / "net" / "lo").mkdir()  # virtual: no device
    irqs = nic_irqs(parse_interrupts(ENA), str(tmp_path / "net"))
    assert irqs == {"ens5": ["25", "26"]}  # the management vector is not a queue


def test_unreadable_interrupts_is_none(tmp_path: Path) -> None:
    assert read_interrupts(str(tmp_path / "absent")) is None
