"""Per-CPU time from ``/proc/stat``: parse the ``cpuN`` lines and turn two reads into per-CPU intervals.

Public API (used by the soak and by ``imagelint watch``):

- :func:`parse_proc_stat` (text → :class:`ProcStat`; the live read is
  :class:`imagelint.probes.cpu.ProcStatReader`);
- :func:`diff` (two :class:`ProcStat` → :class:`Interval`: a :class:`CpuDelta` per CPU, and what
  could not be compared, said);
- :class:`CpuDelta`: ``kernel`` (system + irq + softirq), ``busy`` (all but idle, iowait and steal)
  and ``total`` ticks of one CPU over one interval, with ``kernel_share`` and ``busy_share``.

The columns after ``cpuN`` are user nice system idle iowait irq softirq steal guest guest_nice
(proc(5)), in USER_HZ ticks. ``guest`` and ``guest_nice`` are already counted inside ``user`` and
``nice``, so the total leaves them out. Kernel time is system + irq + softirq: all three run in the
kernel and keep the CPU from anything else, including the NIC's NAPI poll (a softirq).

What is tolerated, and said (each becomes a note; nothing is silently guessed):

- **fewer than 10 columns** (older kernels: 4 before 2.5.41, 7 before steal, 8 before guest, 9
  before guest_nice): the missing counters are taken as 0 — they did not exist, so the kernel counted
  that time elsewhere. Fewer than 4 columns, or a non-number, is an error (:class:`ProcStatError`).
- **hotplug**: ``/proc/stat`` lists online CPUs only. A CPU that appears has no interval until its
  second read; one that disappears ends its interval history. Both are listed in the interval.
- **counters going backwards** (a wrap, a reset, or a kernel accounting glitch): that CPU gets no
  interval for that read; the next interval starts from the new values. ``iowait`` is the exception:
  proc(5) documents that it can decrease, so its delta is clamped to 0 and the interval kept.
"""

from __future__ import annotations

from dataclasses import field

from imagelint.errors import ExitCode, ImageLintError
from imagelint.records import dataclass

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
MIN_FIELDS = 4  # user nice system idle: every kernel since 2.0
CPU_NUMBERS = 1 << 16  # CPUs are numbered below this (NR_CPUS is at most 8,192 on any architecture)
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)


class ProcStatError(ImageLintError):
    """``/proc/stat`` could not be read or does not parse: what it would have said is unknown."""

    exit_code = ExitCode.INCONCLUSIVE


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One read: per online CPU, its counters (always 10, missing ones 0), and how many columns were given."""

    cpus: dict[int, tuple[int, ...]]
    columns: int  # the fewest columns any cpuN line had (10 on current kernels)
    extra_columns: bool = False  # some line had more than 10 (a future kernel): the extras are ignored

    def note(self) -> str | None:
        """What the format lacked or added, in a sentence; None for the ordinary 10 columns."""
        if self.columns < len(FIELDS):
            missing = ", ".join(FIELDS[self.columns :])
            return (
                f"/proc/stat gives {self.columns} of {len(FIELDS)} per-CPU columns (an older kernel): "
                f"{missing} counted as 0"
            )
        if self.extra_columns:
            return (
                "/proc/stat gives more than 10 per-CPU columns (a newer kernel): the extra ones are ignored"
            )
        return None


def parse_proc_stat(text: str, *, where: str = "/proc/stat") -> ProcStat:
    """The ``cpuN`` lines of ``/proc/stat`` (the ``cpu`` total line and the lines after them are skipped)."""
    cpus: dict[int, tuple[int, ...]] = {}
    columns = len(FIELDS)
    extra = False
    pad = (0,) * len(FIELDS)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("cpu"):
            if cpus:
                break  # the kernel prints the cpu lines first, together: the rest (intr...) is not needed
            continue
        if line.startswith("cpu "):
            continue
        parts = line.split()
        name = parts[0]
        if not (name[3:].isascii() and name[3:].isdigit()):
            raise ProcStatError(f"line {number}: {name[:20]!r} is not a cpuN line", where=where)
        if len(name) > 8 or int(name[3:]) >= CPU_NUMBERS:
            raise ProcStatError(
                f"line {number}: {name[:20]!r}: CPUs are numbered below {CPU_NUMBERS:,}", where=where
            )
        given = len(parts) - 1
        if given < MIN_FIELDS:
            raise ProcStatError(
                f"line {number}: {name} has {given} columns, at least {MIN_FIELDS} needed", where=where
            )
        try:
            values = tuple(int(v) for v in parts[1 : 1 + len(FIELDS)])
        except ValueError:
            raise ProcStatError(
                f"line {number}: {name} has a column that is not a number", where=where
            ) from None
        if any(v < 0 for v in values):
            raise ProcStatError(f"line {number}: {name} has a negative counter", where=where)
        cpu = int(name[3:])
        if cpu in cpus:
            raise ProcStatError(f"line {number}: {name} appears twice", where=where)
        columns = min(columns, given)
        extra = extra or given > len(FIELDS)
        cpus[cpu] = values + pad[len(values) :]
    if not cpus:
        raise ProcStatError("no cpuN lines", where=where)
    return ProcStat(cpus, columns, extra)


@dataclass(frozen=True, slots=True)
class CpuDelta:
    """One CPU over one interval, in ticks: kernel (system + irq + softirq), busy, and total time."""

    kernel: int
    busy: int  # user + nice + system + irq + softirq (idle, iowait and steal are not busy)
    total: int  # busy + idle + iowait + steal

    @property
    def kernel_share(self) -> float:
        return self.kernel / self.total if self.total else 0.0

    @property
    def busy_share(self) -> float:
        return self.busy / self.total if self.total else 0.0


@dataclass
class Interval:
    """Per-CPU deltas between two reads, and the CPUs that could not be compared (with why)."""

    deltas: dict[int, CpuDelta]
    appeared: list[int] = field(default_factory=list)  # online now, not at the previous read
    disappeared: list[int] = field(default_factory=list)  # online at the previous read, not now
    backwards: list[tuple[int, str]] = field(default_factory=list)  # (cpu, counter): no delta this time
    iowait_clamped: list[int] = field(default_factory=list)  # iowait decreased (documented): taken as 0
    idle_cpus: list[int] = field(default_factory=list)  # no tick at all elapsed (total 0): not judged


def diff(prev: ProcStat, cur: ProcStat) -> Interval:
    """Per-CPU deltas from ``prev`` to ``cur``; see the module docstring for what is tolerated."""
    out = Interval({})
    for cpu, now in cur.cpus.items():
        before = prev.cpus.get(cpu)
        if before is None:
            out.appeared.append(cpu)
            continue
        d = [b - a for a, b in zip(before, now, strict=True)]
        if d[_IOWAIT] < 0:
            d[_IOWAIT] = 0
            out.iowait_clamped.append(cpu)
        back = next((FIELDS[i] for i, v in enumerate(d) if v < 0), None)
        if back is not None:
            out.backwards.append((cpu, back))
            continue
        kernel = d[_SYSTEM] + d[_IRQ] + d[_SOFTIRQ]
        busy = kernel + d[_USER] + d[_NICE]
        total = busy + d[_IDLE] + d[_IOWAIT] + d[_STEAL]
        if total == 0:
            out.idle_cpus.append(cpu)
            continue
        out.deltas[cpu] = CpuDelta(kernel, busy, total)
    out.disappeared = [cpu for cpu in prev.cpus if cpu not in cur.cpus]
    return out
