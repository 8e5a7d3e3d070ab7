"""Which CPUs take the NIC's queue interrupts: ``/proc/interrupts`` parsed, NIC IRQs matched, reads compared.

A hot core starves the NAPI poll only if the NIC's queue interrupts (and so its softirq work) land
on that core. :func:`match_nic_irqs` finds each network interface's IRQs exactly, from the MSI IRQs
of its device (what sysfs says of it: :class:`NicDevice`, read on the running host by
:func:`imagelint.probes.interrupts.nic_devices` or recorded in a bundle) and by name in
``/proc/interrupts`` (``IF-...``, ``ena``, ``virtioN-input/output`` of the interface's virtio
device). :func:`nic_interrupts` says, per interface, how many interrupts each CPU took between two
reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IrqRow:
    counts: dict[int, int]  # cpu → interrupts since boot
    name: str  # the last column(s): chip, hwirq, action names


def parse_interrupts(text: str) -> dict[str, IrqRow]:
    """Rows of ``/proc/interrupts`` by IRQ (numbered ones only); CPU columns follow the header."""
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = [int(h[3:]) for h in lines[0].split() if h.startswith("CPU") and h[3:].isdigit()]
    rows: dict[str, IrqRow] = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        irq = head.strip()
        if not irq.isdigit():
            continue
        parts = rest.split()
        counts: dict[int, int] = {}
        for cpu, value in zip(cpus, parts, strict=False):
            if not value.isdigit():
                break
            counts[cpu] = int(value)
        rows[irq] = IrqRow(counts, " ".join(parts[len(counts) :]))
    return rows


@dataclass(frozen=True)
class NicDevice:
    """What sysfs says of one interface's device: its name (``virtio2``, ``0000:00:05.0``) and MSI IRQs."""

    name: str
    msi_irqs: frozenset[str]


def match_nic_irqs(rows: dict[str, IrqRow], devices: dict[str, NicDevice]) -> dict[str, list[str]]:
    """Interface → its IRQ numbers: its device's MSI IRQs, and the rows of ``/proc/interrupts`` named
    after it (``IF-...``, ``ena``, ``virtioN-input/output`` of its virtio device)."""
    out: dict[str, list[str]] = {}
    for iface, device in sorted(devices.items()):
        irqs = set(device.msi_irqs)
        virtio = device.name
        pattern = re.compile(
            rf"(^|\s){re.escape(iface)}[-_]|(^|\s)ena(\s|-|$)"
            + (rf"|(^|\s){re.escape(virtio)}-(input|output)" if virtio.startswith("virtio") else "")
        )
        irqs.update(irq for irq, row in rows.items() if pattern.search(row.name))
        # config/event vectors of the device are no queues: keep the ones named as queues when known
        named = {
            i for i in irqs if i in rows and re.search(r"(?i)(rx|tx|input|output|queue|comp)", rows[i].name)
        }
        out[iface] = sorted(named or irqs, key=int)
    return out


@dataclass
class NicInterrupts:
    """Per interface, the interrupts each CPU took between two reads of ``/proc/interrupts``."""

    per_cpu: dict[str, dict[int, int]]  # iface → cpu → interrupts in the window
    irqs: dict[str, list[str]]

    def cpus_of(self, iface: str) -> list[int]:
        return sorted(c for c, n in self.per_cpu.get(iface, {}).items() if n > 0)

    def text(self, cpus: list[int]) -> str:
        """Whether the NIC queues' interrupts landed on ``cpus`` (the hot ones), in a sentence."""
        if not self.per_cpu:
            return "no NIC queue interrupts found in /proc/interrupts"
        parts = []
        for iface, counts in sorted(self.per_cpu.items()):
            total = sum(counts.values())
            on_hot = sum(counts.get(c, 0) for c in cpus)
            where = ", ".join(f"cpu{c} {n:,}" for c, n in sorted(counts.items()) if n) or "none"
            verdict = (
                f"{on_hot * 100 // total}% on the hot CPU(s)" if total else "no interrupts in the window"
            )
            parts.append(f"{iface} queue interrupts: {where} ({verdict})")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "irqs": self.irqs,
            "per_cpu": {i: {f"cpu{c}": n for c, n in sorted(v.items())} for i, v in self.per_cpu.items()},
        }


def nic_interrupts(
    before: dict[str, IrqRow], after: dict[str, IrqRow], irqs: dict[str, list[str]]
) -> NicInterrupts:
    """Interrupts per CPU between two reads, summed over each interface's IRQs (a CPU absent at
    either read, or a count that went backwards, contributes nothing)."""
    per_cpu: dict[str, dict[int, int]] = {}
    for iface, numbers in irqs.items():
        counts: dict[int, int] = {}
        for irq in numbers:
            a, b = before.get(irq), after.get(irq)
            if a is None or b is None:
                continue
            for cpu, n in b.counts.items():
                counts[cpu] = counts.get(cpu, 0) + max(0, n - a.counts.get(cpu, n))
        if numbers:
            per_cpu[iface] = counts
    return NicInterrupts(per_cpu, irqs)
