"""Synthetic /proc/stat text for the per-CPU parser and tracker tests (the kernel's own layout)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def proc_stat(cpus: Mapping[int, Sequence[int]], *, intr_irqs: int = 0) -> str:
    """A /proc/stat with these cpuN rows (as many columns as each sequence has), the total line
    first and the lines that follow on a real kernel (intr with ``intr_irqs`` counters, ctxt, ...)."""
    width = max(len(v) for v in cpus.values())
    total = [sum(v[i] if i < len(v) else 0 for v in cpus.values()) for i in range(width)]
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += [f"cpu{c} " + " ".join(map(str, v)) for c, v in sorted(cpus.items())]
    lines.append("intr 123456 " + " ".join(["0"] * intr_irqs))
    lines += ["ctxt 987654", "btime 1700000000", "processes 4242", "procs_running 1", "procs_blocked 0"]
    lines.append("softirq 5555 0 1 2 3 4 5 6 7 8 9")
    return "\n".join(lines) + "\n"


def counters(user: int = 0, system: int = 0, idle: int = 0, softirq: int = 0, irq: int = 0) -> list[int]:
    """The ten columns in kernel order: user nice system idle iowait irq softirq steal guest guest_nice."""
    return [user, 0, system, idle, 0, irq, softirq, 0, 0, 0]
