"""What the collector recorded of the incident's symptoms during a soak, read as the local soak's facts.

- ``soak/cpu``: ``mode`` and ``period`` lines, then per read of ``/proc/stat`` a ``t UPTIME`` line and
  its ``cpuN`` lines (``soak/cpu.error`` when there was no ``/proc/stat``). Each pair of reads becomes
  one interval of a :class:`~imagelint.facts.cpurecord.CpuRecord`, parsed by the same
  :func:`~imagelint.facts.cpustat.parse_proc_stat`; an interval that overlaps one of the soak's own
  memory.stat walks is a gap, as in the local soak (the walk is kernel time of imagelint's making).
- ``soak/probe.walk.NNNNN``: the memory.stat walk timed after every fifth sample, named by the sample
  it follows (the walks at the start and end are ``probe.start`` / ``probe.end``).
- ``soak/interrupts.start`` / ``interrupts.end`` and ``soak/nics`` (``nic IFACE DEVICE IRQ...``): the
  NIC queues' interrupts per CPU over the soak (:func:`~imagelint.facts.interrupts.nic_interrupts`).
- ``soak/cost``: the shell's ``times`` before and after the soak: the collector's own CPU cost.

Everything here comes from the instance: sizes, counts and names are bounded and checked, and a record
that does not parse is one line naming it (the soak is then inconclusive), never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from imagelint.bundle.numbers import count, seconds
from imagelint.bundle.probes import shell_times
from imagelint.errors import ImageReadError
from imagelint.facts.cgroups import ProbeResult, Sample
from imagelint.facts.cpurecord import CpuRecord
from imagelint.facts.cpustat import ProcStat, ProcStatError, parse_proc_stat
from imagelint.facts.hotcore import MAX_EPISODES
from imagelint.facts.interrupts import (
    NicDevice,
    NicInterrupts,
    match_nic_irqs,
    nic_interrupts,
    parse_interrupts,
)

MAX_CPU_RECORD = 128 * 1024 * 1024  # the collector keeps CPUs x reads under 1,000,000 (~60 MB)
MAX_CPUS = 8192  # CONFIG_NR_CPUS at its largest on x86_64 and arm64
MAX_INTERRUPTS = 4 * 1024 * 1024
MAX_NICS = 4096
_IFACE = re.compile(r"[^\s/]{1,15}")  # IFNAMSIZ - 1 bytes, no '/' and no whitespace (dev_valid_name)
_DEVICE = re.compile(r"[A-Za-z0-9:._-]{1,64}")
_WALK = re.compile(r"probe\.walk\.(\d{5})")


def _where(path: Path) -> str:
    return f"imagelint/soak/{path.name}"


def _reads(path: Path) -> Iterator[tuple[float, ProcStat, int]]:
    """(uptime, the read, line number) of each read in ``soak/cpu``."""
    where = _where(path)
    if path.stat().st_size > MAX_CPU_RECORD:
        raise ImageReadError(where, f"over {MAX_CPU_RECORD >> 20} MiB; not read")
    stamp: tuple[float, int] | None = None
    lines: list[str] = []

    def read() -> tuple[float, ProcStat, int]:
        assert stamp is not None
        try:
            return stamp[0], parse_proc_stat("\n".join(lines), where=f"{where}:{stamp[1]}"), stamp[1]
        except ProcStatError as exc:
            raise ImageReadError(exc.where or where, exc.message) from None

    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode("ascii", "replace").rstrip("\n")
            if line.startswith("t "):
                if stamp is not None and lines:
                    yield read()
                stamp, lines = (seconds(line[2:], f"{where}:{number}", "t"), number), []
            elif line.startswith("cpu") and stamp is not None:
                if len(lines) >= MAX_CPUS:
                    raise ImageReadError(f"{where}:{number}", f"more than {MAX_CPUS} CPUs in one read")
                lines.append(line)
            elif stamp is not None or not line.startswith(("mode ", "period ")):
                raise ImageReadError(f"{where}:{number}", f"unexpected line {line[:60]!r}")
    if stamp is not None and lines:
        yield read()


def _header(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    with path.open("rb") as f:
        for raw in f:
            key, _, value = raw.decode("ascii", "replace").rstrip("\n").partition(" ")
            if key not in ("mode", "period"):
                break
            values[key] = value[:16]
    return values


def cpu_record(meta: Path, walks: list[tuple[float, float]]) -> tuple[CpuRecord | None, str]:
    """The per-CPU intervals the collector read, intervals overlapping a walk (uptime spans) masked;
    None with the reason when it read none."""
    soak = meta / "soak"
    error = soak / "cpu.error"
    if error.is_file():
        return None, error.read_bytes()[:200].decode("ascii", "replace").strip() or "no /proc/stat"
    path = soak / "cpu"
    if not path.is_file():
        return None, "per-CPU time not read (the collector that made this bundle does not read /proc/stat)"
    header = _header(path)
    period = count(header.get("period"), _where(path), "period", least=1) / 100
    record: CpuRecord | None = None
    prev: tuple[float, ProcStat] | None = None
    for t, cur, number in _reads(path):
        if prev is None:
            record = CpuRecord(period, t, online=sorted(cur.cpus), columns_note=cur.note())
        else:
            assert record is not None
            if t < prev[0]:
                raise ImageReadError(f"{_where(path)}:{number}", "uptime went backwards")
            masked = any(w0 < t and w1 > prev[0] for w0, w1 in walks)
            record.add(prev[1], cur, prev[0], t, masked=masked)
        record.reads += 1
        prev = (t, cur)
    if record is None:
        return None, "per-CPU time not read (the collector recorded no read of /proc/stat)"
    if record.tracker().overflowed:
        raise ImageReadError(_where(path), f"more than {MAX_EPISODES:,} hot-core episodes")
    record.cpu_seconds = reader_cpu(meta)
    return record, f"read by the collector ({header.get('mode', 'sh')}, every {period:g} s)"


def walk_span(meta: Path, name: str) -> tuple[float, float] | None:
    """The uptime span of one recorded walk (``probe.NAME``), if the collector stamped it."""
    path = meta / "soak" / f"probe.{name}"
    if not path.is_file():
        return None
    values = dict(line.partition(" ")[::2] for line in path.read_text("ascii", "replace").splitlines()[:32])
    if "uptime-start" not in values:
        return None
    where = _where(path)
    span = (
        seconds(values["uptime-start"], where, "uptime-start"),
        seconds(values.get("uptime-end"), where, "uptime-end"),
    )
    if span[1] < span[0]:
        raise ImageReadError(where, "uptime-end is before uptime-start")
    return span


def walk_names(meta: Path) -> list[tuple[int, str]]:
    """(sample index, probe name) of the walks timed during the soak, in order."""
    found = []
    for path in (meta / "soak").glob("probe.walk.*"):
        match = _WALK.fullmatch(path.name)
        if match is None:
            raise ImageReadError(_where(path), "not a walk record name")
        found.append((int(match.group(1)), path.name.removeprefix("probe.")))
    return sorted(found)


def walks_during(
    meta: Path, samples: list[Sample], probe: dict[str, ProbeResult | None]
) -> list[tuple[float, ProbeResult]]:
    """(seconds since the first sample, walk) of the walks timed during the soak."""
    out = []
    for index, name in walk_names(meta):
        result = probe.get(name)
        if result is None or not samples:
            continue
        sample = samples[min(index, len(samples) - 1)]
        out.append((sample.monotonic - samples[0].monotonic, result))
    return out


def nics(meta: Path) -> dict[str, NicDevice] | None:
    path = meta / "soak" / "nics"
    if not path.is_file():
        return None
    devices: dict[str, NicDevice] = {}
    for number, line in enumerate(path.read_text("ascii", "replace").splitlines(), 1):
        parts = line.split(" ")
        at = f"{_where(path)}:{number}"
        if (
            len(parts) < 3
            or parts[0] != "nic"
            or not _IFACE.fullmatch(parts[1])
            or not _DEVICE.fullmatch(parts[2])
        ):
            raise ImageReadError(at, f"not a 'nic IFACE DEVICE IRQ...' line: {line[:60]!r}")
        if len(devices) >= MAX_NICS:
            raise ImageReadError(at, f"more than {MAX_NICS} interfaces")
        irqs = frozenset(str(count(n, at, "irq")) for n in parts[3:] if n)
        devices[parts[1]] = NicDevice(parts[2], irqs)
    return devices


def _interrupts(meta: Path, name: str) -> str | None:
    path = meta / "soak" / f"interrupts.{name}"
    if not path.is_file():
        return None
    if path.stat().st_size > MAX_INTERRUPTS:
        raise ImageReadError(_where(path), f"over {MAX_INTERRUPTS >> 20} MiB; not read")
    return path.read_text("ascii", "replace")


def nic_interrupts_of(meta: Path) -> NicInterrupts | None:
    """Per NIC, the interrupts each CPU took over the soak; None when the collector read none."""
    before, after, devices = _interrupts(meta, "start"), _interrupts(meta, "end"), nics(meta)
    if before is None or after is None or devices is None:
        return None
    start, end = _where(meta / "soak/interrupts.start"), _where(meta / "soak/interrupts.end")
    rows_after = parse_interrupts(after, where=end)
    matched = match_nic_irqs(rows_after, devices, where=f"{end} with {_where(meta / 'soak/nics')}")
    return nic_interrupts(parse_interrupts(before, where=start), rows_after, matched, where=end)


def _cost(meta: Path) -> tuple[dict[str, str], str]:
    path = meta / "soak" / "cost"
    if not path.is_file():
        return {}, _where(path)
    lines = path.read_text("ascii", "replace").splitlines()[:8]
    return dict(line.partition(" ")[::2] for line in lines), _where(path)


def collector_cpu(meta: Path) -> float:
    """The CPU time (user + system, its children's included) the collector spent during the soak."""
    values, where = _cost(meta)
    before, after = (sum(shell_times(values.get(k, ""), where)) for k in ("times-before", "times-after"))
    return max(0.0, after - before)


def reader_cpu(meta: Path) -> float:
    """The CPU time the per-CPU reader spent (its ``sleep`` processes included, under sh)."""
    values, where = _cost(meta)
    return sum(shell_times(values.get("reader-times", ""), where))
