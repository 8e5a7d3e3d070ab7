"""NIC queue interrupts per CPU from two parsed reads of /proc/interrupts (an ENA-shaped host)."""

from __future__ import annotations

import pytest

from imagelint.errors import ImageReadError
from imagelint.facts.interrupts import NicDevice, match_nic_irqs, nic_interrupts, parse_interrupts
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


def test_rows_are_matched_by_their_words() -> None:
    """``IF-``/``IF_`` words, ``ena``, and the virtio device's input/output queues; not a word that
    only contains the name."""
    text = "\n".join(
        [
            "           CPU0",
            "  30:  1  PCI-MSI  eth0-rx-0",
            "  31:  1  PCI-MSI  eth0_tx_1",
            "  32:  1  PCI-MSI  virtio3-input.0",
            "  33:  1  PCI-MSI  ena-mgmnt@pci:0000:00:05.0",
            "  34:  1  PCI-MSI  xeth0-rx-0",
            "  35:  1  PCI-MSI  virtio3-config",
        ]
    )
    devices = {"eth0": NicDevice("0000:00:05.0", frozenset()), "ens6": NicDevice("virtio3", frozenset())}
    assert match_nic_irqs(parse_interrupts(text), devices) == {"eth0": ["30", "31"], "ens6": ["32"]}


def test_what_two_reads_produce_is_bounded() -> None:
    """Every interface matches every ``ena`` row: past the bound of pairs the read is refused."""
    rows = parse_interrupts("CPU0\n" + "".join(f"{i}: 1 ena-rx\n" for i in range(5_000)))
    devices = {f"eth{i}": NicDevice(f"virtio{i}", frozenset()) for i in range(4)}
    with pytest.raises(ImageReadError, match="pairs match"):
        match_nic_irqs(rows, devices, where="interrupts.end")
