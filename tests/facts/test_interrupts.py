"""NIC queue interrupts per CPU from two parsed reads of /proc/interrupts (an ENA-shaped host)."""

from __future__ import annotations

from imagelint.facts.interrupts import nic_interrupts, parse_interrupts
from tests.facts.interrupts_text import ENA


def test_ena_queue_interrupts_and_where_they_landed() -> None:
    before = parse_interrupts(ENA)
    assert before["25"].counts == {0: 100, 1: 5000, 2: 0} and before["25"].name.endswith("ens5-Tx-Rx-0")
    after = parse_interrupts(ENA.replace("5000", "8000").replace("9000", "9500"))
    placed = nic_interrupts(before, after, {"ens5": ["25", "26"]})
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
