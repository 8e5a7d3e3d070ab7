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
from typing import Any

from imagelint.errors import ImageReadError
from imagelint.facts.cpustat import CPU_NUMBERS
from imagelint.records import dataclass

# What one read may hold and what it may produce. A record that is small can still multiply: every
# interface matches every ``ena`` row, and each matched IRQ is summed over every CPU column, so the
# bounds are on what is produced, not only on bytes read. Past one, the read is refused (inconclusive).
MAX_ROWS = 65_536  # numbered IRQs in one read (a large host has a few thousand)
MAX_NIC_IRQS = 16_384  # (interface, IRQ) pairs matched over all interfaces (8 NICs x 32 queues: 256)
MAX_SUMMED = 1 << 22  # (interface, IRQ) pairs x CPU columns summed between two reads
MAX_NIC_CELLS = 65_536  # (interface, CPU) counts kept and reported (8 NICs x 8,192 CPUs)
_COUNT = re.compile(r"[0-9]{1,20}")  # a u64 counter
_QUEUE = re.compile(r"(?i)(rx|tx|input|output|queue|comp)")


@dataclass(frozen=True, slots=True)
class IrqRow:
    """One numbered row: its counts are parsed when asked for (only matched rows ever are)."""

    cpus: tuple[int, ...]  # the header's CPU numbers, shared by every row of the read
    values: str  # what follows ``IRQ:``, the counts first
    name: str  # the last column(s): chip, hwirq, action names

    @property
    def counts(self) -> dict[int, int]:
        """CPU -> interrupts since boot, for the leading columns that are counts."""
        counts: dict[int, int] = {}
        for cpu, value in zip(self.cpus, self.values.split(), strict=False):
            if not _COUNT.fullmatch(value):
                break
            counts[cpu] = int(value)
        return counts


def parse_interrupts(text: str, *, where: str = "/proc/interrupts") -> dict[str, IrqRow]:
    """Rows of ``/proc/interrupts`` by IRQ (numbered ones only); CPU columns follow the header."""
    lines = iter(text.splitlines())
    header = next(lines, "")
    cpus: list[int] = []
    for h in header.split():
        if h.startswith("CPU") and _COUNT.fullmatch(h[3:]):
            if int(h[3:]) >= CPU_NUMBERS or len(cpus) >= CPU_NUMBERS:
                raise ImageReadError(f"{where}:1", f"{h[:40]!r}: CPUs are numbered below {CPU_NUMBERS:,}")
            cpus.append(int(h[3:]))
    columns = tuple(cpus)
    rows: dict[str, IrqRow] = {}
    for number, line in enumerate(lines, 2):
        head, _, rest = line.partition(":")
        irq = head.strip()
        if not _COUNT.fullmatch(irq):
            continue
        if len(rows) >= MAX_ROWS:
            raise ImageReadError(f"{where}:{number}", f"more than {MAX_ROWS:,} numbered interrupts")
        parts = rest.split()
        counted = 0
        for value in parts[: len(columns)]:
            if not _COUNT.fullmatch(value):
                break
            counted += 1
        rows[irq] = IrqRow(columns, rest, " ".join(parts[counted:]))
    return rows


@dataclass(frozen=True)
class NicDevice:
    """What sysfs says of one interface's device: its name (``virtio2``, ``0000:00:05.0``) and MSI IRQs."""

    name: str
    msi_irqs: frozenset[str]


def match_nic_irqs(
    rows: dict[str, IrqRow], devices: dict[str, NicDevice], *, where: str = "/proc/interrupts"
) -> dict[str, list[str]]:
    """Interface → its IRQ numbers: its device's MSI IRQs, and the rows of ``/proc/interrupts`` named
    after it (a word ``IF-...`` or ``IF_...``, ``ena`` or ``ena-...``, ``virtioN-input/output`` of its
    virtio device). Words are looked up, not searched for, so the work grows with the rows' text."""
    found = {iface: set(device.msi_irqs) for iface, device in devices.items()}
    virtio: dict[str, list[str]] = {}
    for iface, device in devices.items():
        if device.name.startswith("virtio"):
            virtio.setdefault(device.name, []).append(iface)
    pairs = sum(len(irqs) for irqs in found.values())
    for irq, row in rows.items():
        hit: set[str] = set()
        for word in row.name.split():
            if word == "ena" or word.startswith("ena-"):
                hit.update(devices)
            for at, char in enumerate(word):
                if char in "-_" and word[:at] in devices:
                    hit.add(word[:at])
                if char == "-" and word.startswith(("input", "output"), at + 1):
                    hit.update(virtio.get(word[:at], ()))
        hit = {iface for iface in hit if irq not in found[iface]}
        pairs += len(hit)
        if pairs > MAX_NIC_IRQS:
            raise ImageReadError(where, f"more than {MAX_NIC_IRQS:,} (interface, IRQ) pairs match")
        for iface in hit:
            found[iface].add(irq)
    out: dict[str, list[str]] = {}
    for iface, irqs in sorted(found.items()):
        # config/event vectors of the device are no queues: keep the ones named as queues when known
        named = {i for i in irqs if i in rows and _QUEUE.search(rows[i].name)}
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
    before: dict[str, IrqRow],
    after: dict[str, IrqRow],
    irqs: dict[str, list[str]],
    *,
    where: str = "/proc/interrupts",
) -> NicInterrupts:
    """Interrupts per CPU between two reads, summed over each interface's IRQs (a CPU absent at
    either read, or a count that went backwards, contributes nothing)."""
    columns = max((len(row.cpus) for row in after.values()), default=0)
    pairs = sum(len(numbers) for numbers in irqs.values())
    if pairs * columns > MAX_SUMMED:
        raise ImageReadError(
            where, f"{pairs:,} NIC interrupts x {columns:,} CPUs is more than {MAX_SUMMED:,} counts to sum"
        )
    per_cpu: dict[str, dict[int, int]] = {}
    cells = 0
    for iface, numbers in irqs.items():
        counts: dict[int, int] = {}
        for irq in numbers:
            a, b = before.get(irq), after.get(irq)
            if a is None or b is None:
                continue
            earlier = a.counts
            for cpu, n in b.counts.items():
                counts[cpu] = counts.get(cpu, 0) + max(0, n - earlier.get(cpu, n))
        if numbers:
            cells += len(counts)
            if cells > MAX_NIC_CELLS:
                raise ImageReadError(where, f"more than {MAX_NIC_CELLS:,} (interface, CPU) counts")
            per_cpu[iface] = counts
    return NicInterrupts(per_cpu, irqs)
