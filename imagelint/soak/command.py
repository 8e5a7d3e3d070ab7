"""`imagelint soak`: watch the running host for a while, then judge the soak-scope rules on what was seen.

The order: load rules (bad usage fails before any waiting), time one memory.stat walk, sample every
interval until the duration is up or SIGINT/SIGTERM arrives, time the walk again, run the rules,
write the outputs. A soak cut short still writes a complete report of what it measured; it says
so, and it cannot pass (a gate must not pass on a partial soak), though it can fail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from imagelint import stderr
from imagelint.errors import UsageError
from imagelint.facts.cgroups import ProbeResult, Sample
from imagelint.facts.cpustat import ProcStatError
from imagelint.facts.interrupts import nic_interrupts
from imagelint.facts.soak import SoakFacts
from imagelint.probes.cgroups import CgroupSampler, probe_memory_stat
from imagelint.probes.cpu import CpuSampler
from imagelint.probes.interrupts import nic_irqs, read_interrupts
from imagelint.report import Verdict
from imagelint.report.escape import for_log
from imagelint.session import RunOptions, judge_soak, prepare, publish
from imagelint.soak.runner import run_soak, stop_on_signals
from imagelint.targets import HostTarget

PLAIN_PROGRESS_EVERY_S = 30
WALK_EVERY = 5  # time the memory.stat walk after every 5th sample too, beside the per-CPU reads


def run_soak_command(duration: float, interval: float, options: RunOptions, *, interactive: bool) -> Verdict:
    if interval > duration:
        raise UsageError(f"--interval ({interval:g}s) is longer than --duration ({duration:g}s)")
    run = prepare(options)
    sampler = CgroupSampler()
    walk_start = probe_memory_stat(sampler.layout)
    stop = threading.Event()
    irqs_before = read_interrupts()
    cpu, cpu_note = _cpu_sampler(duration)

    def walk() -> ProbeResult:
        if cpu is None:
            return probe_memory_stat(sampler.layout)
        with cpu.masked():  # the walk is kernel time on one CPU of our own making: not judged
            return probe_memory_stat(sampler.layout)

    try:
        with stop_on_signals(stop), _progress(duration, interval, interactive) as on_sample:
            result = run_soak(
                sampler,
                duration=duration,
                interval=interval,
                on_sample=on_sample,
                stop=stop,
                probe=walk,
                probe_every=WALK_EVERY,
            )
    finally:
        record = cpu.stop() if cpu else None
    irqs_after = read_interrupts()
    walk_end = probe_memory_stat(sampler.layout)
    facts = SoakFacts(result, sampler.layout, walk_start, walk_end, cpu=record, cpu_note=cpu_note)
    if irqs_before is not None and irqs_after is not None:
        facts.nic_interrupts = nic_interrupts(irqs_before, irqs_after, nic_irqs(irqs_after))
    return publish(judge_soak(run, HostTarget(), facts), options)


def _cpu_sampler(duration: float) -> tuple[CpuSampler | None, str]:
    """The per-CPU reader, started; None with the reason when /proc/stat cannot be read at all."""
    try:
        return CpuSampler(duration=duration).start(), ""
    except ProcStatError as exc:
        return None, str(exc)


@contextmanager
def _progress(duration: float, interval: float, interactive: bool) -> Iterator[Callable[[Sample], None]]:
    """A progress bar on a terminal; a plain line every ~30 s otherwise (CI logs). Both on stderr."""
    started = time.monotonic()
    dying: list[tuple[float, float]] = []

    def status(sample: Sample) -> str:
        if sample.dying is None:
            return "no memory cgroup counts on this host"
        dying.append((sample.monotonic, float(sample.dying)))
        text = f"dying {sample.dying:,} · live {sample.live:,}"
        if len(dying) >= 3:
            from imagelint.facts.trend import theil_sen

            slope, _ = theil_sen([t for t, _ in dying], [v for _, v in dying])
            text += f" · slope {slope * 3600:+,.0f}/h"
        return text

    if not interactive:
        every = max(1, round(PLAIN_PROGRESS_EVERY_S / interval))
        count = 0

        def plain(sample: Sample) -> None:
            nonlocal count
            line = status(sample)
            if count % every == 0:
                elapsed = time.monotonic() - started
                stderr.line(f"soak {elapsed:6.0f}s/{duration:.0f}s  {line}")
            count += 1

        yield plain
        return

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    description = TextColumn("{task.description}", markup=False)
    columns = (TextColumn("soak"), BarColumn(), TimeRemainingColumn(), description)
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("starting", total=duration)

        def bar(sample: Sample) -> None:
            progress.update(
                task, completed=min(duration, time.monotonic() - started), description=for_log(status(sample))
            )

        yield bar
