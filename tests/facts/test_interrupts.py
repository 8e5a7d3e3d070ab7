"""NIC queue interrupts per CPU: this machine's /proc/interrupts and sysfs, and an ENA-shaped host."""

from __future__ import annotations

import os
from pathlib import Path

from imagelint.facts.interrupts import nic_interrupts, nic_irqs, parse_interrupts, read_interrupts

ENA = """\
           CPU0       CPU1       CPU2
  24:          0          0          0   PCI-MSI 81920-edge      ena-mgmnt@pci:0000:00:05.0
  25:        100       5000          0   PCI-MSI 81921-edge      ens5-Tx-Rx-0
  26:          7          0       9000   PCI-MSI 81922-edge      ens5-Tx-Rx-1
  27:          1          2          3   PCI-MSI 65536-edge      nvme0q0
 NMI:          0          0          0   Non-maskable interrupts
"""


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


def test_ena_queues_by_sysfs_and_name_and_where_they_landed(tmp_path: Path) -> None:
    device = tmp_path / "devices" / "0000:00:05.0"
    (device / "msi_irqs").mkdir(parents=True)
    for irq in ("24", "25", "26"):
        (device / "msi_irqs" / irq).mkdir()
    (tmp_path / "net" / "ens5").mkdir(parents=True)
    (tmp_path / "net" / "ens5" / "device").symlink_to(device)
    (tmp_path / "net" / "lo").mkdir()  # virtual: no device
    before = parse_interrupts(ENA)
    assert before["25"].counts == {0: 100, 1: 5000, 2: 0} and before["25"].name.endswith("ens5-Tx-Rx-0")
    irqs = nic_irqs(before, str(tmp_path / "net"))
    assert irqs == {"ens5": ["25", "26"]}  # the management vector is not a queue
    after = parse_interrupts(ENA.replace("5000", "8000").replace("9000", "9500"))
    placed = nic_interrupts(before, after, irqs)
    assert placed.per_cpu == {"ens5": {0: 0, 1: 3000, 2: 500}}
    assert placed.cpus_of("ens5") == [1, 2]
    assert placed.text([1]) == "ens5 queue interrupts: cpu1 3,000, cpu2 500 (85% on the hot CPU(s))"


def test_a_cpu_column_missing_after_hotplug_contributes_nothing() -> None:
    before = parse_interrupts(ENA)
    two = "\n".join(
        ["           CPU0       CPU1", "  25:        100       5100   PCI-MSI 81921-edge      ens5-Tx-Rx-0"]
    )
    placed = nic_interrupts(before, parse_interrupts(two), {"ens5": ["25"]})
    assert placed.per_cpu == {"ens5": {0: 0, 1: 100}}


def test_unreadable_interrupts_is_none(tmp_path: Path) -> None:
    assert read_interrupts(str(tmp_path / "absent")) is None
