"""Real loads pinned to one CPU, for the hot-core tests (the local soak and the remote one).

The load runs under SCHED_FIFO, so that it holds ~95% of that CPU (the kernel leaves the rest to
ordinary tasks) however busy the machine is with other people's work. In the kernel: ``dd
if=/dev/zero of=/dev/null bs=1M`` (each read clears 1 MiB in the kernel: system time). In user
time: a pure Python loop.

A test that holds every CPU with a load (two on a two-CPU machine) runs its sampler under
:func:`sampler_first`: above the loads, as a host's ordinary work would leave it room. Otherwise the
sampler runs only in the 5% the kernel leaves ordinary tasks, once a second instead of ten times,
and the record is of the starvation (stop 54's CI: no episode long enough to count). :func:`pinned`
refuses a second load outside it. ``LOOSE`` loosens only what a shared machine cannot give:
``max_others_kernel_share`` 1.0 (the other CPUs are as busy in the kernel as the neighbours make them) and
``min_kernel_share`` 0.75 (margin below the ~95% the load gets).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import is_root, must_run_alone, need

LOAD_PRIORITY = 10
SAMPLER_PRIORITY = 20  # above the loads: the sampler reads when it means to
KERNEL_LOAD = ["dd", "if=/dev/zero", "of=/dev/null", "bs=1M"]
USER_LOAD = [sys.executable, "-c", "while True: pass"]
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


_loads: list[subprocess.Popen[bytes]] = []  # the loads running now
_sampler_first = False  # within sampler_first()


@contextmanager
def pinned(command: list[str], cpu: int) -> Iterator[None]:
    """``command`` running on ``cpu`` alone, under SCHED_FIFO, for the block (a ``serial`` test's)."""
    must_run_alone("a CPU load pinned under SCHED_FIFO")
    if _loads and not _sampler_first:
        raise AssertionError("a second SCHED_FIFO load starves the sampler: start it in sampler_first()")

    def setup() -> None:
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(LOAD_PRIORITY))

    proc = subprocess.Popen(command, preexec_fn=setup, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _loads.append(proc)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
        _loads.remove(proc)


@contextmanager
def sampler_first() -> Iterator[None]:
    """The calling thread, and the threads and processes it starts in the block (a sampler, the
    collector), under SCHED_FIFO above the loads; back to ordinary scheduling after."""
    global _sampler_first
    need(is_root(), "SCHED_FIFO needs root")
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(SAMPLER_PRIORITY))  # 0: this thread
    _sampler_first = True
    try:
        yield
    finally:
        _sampler_first = False
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
