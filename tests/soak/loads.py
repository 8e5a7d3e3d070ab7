"""Real loads pinned to one CPU, for the hot-core tests (the local soak and the remote one).

A load runs under SCHED_FIFO, so that it holds ~95% of that CPU (the kernel leaves the rest to
ordinary tasks) however busy the machine is with other people's work. At most one load of a test is
real-time: a second one (the "other core busy" of issue 49) is ordinary work (``realtime=False``), as
it was in the incident. With every CPU held by a SCHED_FIFO load, the sampler under test would run only
in the 5% the kernel leaves ordinary tasks, once a second instead of ten times (seen on CI: no episode
was long enough to count); an ordinary load shares its CPU with the sampler as any host's work does.

In the kernel: ``dd if=/dev/zero of=/dev/null bs=1M`` (each read clears 1 MiB in the kernel:
system time). In user time: a pure Python loop. ``LOOSE`` loosens only what a shared machine cannot
give: ``max_others_kernel_share`` 1.0 (the other CPUs are as busy in the kernel as the neighbours
make them) and ``min_kernel_share`` 0.75 (margin below the ~95% the load gets).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import is_root, must_run_alone, need

KERNEL_LOAD = ["dd", "if=/dev/zero", "of=/dev/null", "bs=1M"]
USER_LOAD = [sys.executable, "-c", "while True: pass"]
_realtime_running: list[subprocess.Popen[bytes]] = []  # at most one: see the module docstring
LOOSE = {"max_others_kernel_share": 1.0, "min_kernel_share": 0.75, "min_seconds": 3}


def pinned_cpu() -> int:
    """The CPU a load is pinned to (the last this process may use); needs root."""
    need(is_root(), "SCHED_FIFO and pinning a load need root")
    return max(os.sched_getaffinity(0))


def two_cpus() -> tuple[int, int]:
    """Two CPUs this process may use, each to get a load of its own; needs root and two CPUs."""
    need(is_root(), "SCHED_FIFO and pinning a load need root")
    cpus = sorted(os.sched_getaffinity(0))
    need(len(cpus) >= 2, f"a load beside another needs two CPUs; this process may use {len(cpus)}")
    return cpus[-2], cpus[-1]


@contextmanager
def pinned(command: list[str], cpu: int, *, realtime: bool = True) -> Iterator[None]:
    """``command`` running on ``cpu`` alone for the block (a ``serial`` test's), under SCHED_FIFO
    unless ``realtime`` is off (then as ordinary work, which the sampler can share the CPU with)."""
    must_run_alone("a CPU load pinned to one CPU")
    if realtime and _realtime_running:
        raise AssertionError("a second SCHED_FIFO load would starve the sampler: pass realtime=False")

    def setup() -> None:
        os.sched_setaffinity(0, {cpu})
        if realtime:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))

    proc = subprocess.Popen(command, preexec_fn=setup, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if realtime:
        _realtime_running.append(proc)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
        if realtime:
            _realtime_running.remove(proc)
