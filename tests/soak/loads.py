"""Real loads pinned to one CPU, for the hot-core tests (the local soak and the remote one).

The load runs under SCHED_FIFO, so that it holds ~95% of that CPU (the kernel leaves the rest to
ordinary tasks) however busy the machine is with other people's work. In the kernel: ``dd
if=/dev/zero of=/dev/null bs=1M`` (each read clears 1 MiB in the kernel: system time). In user
time: a pure Python loop. ``LOOSE`` loosens only what a shared machine cannot give:
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


@contextmanager
def pinned(command: list[str], cpu: int) -> Iterator[None]:
    """``command`` running on ``cpu`` alone, under SCHED_FIFO, for the block (a ``serial`` test's)."""
    must_run_alone("a CPU load pinned under SCHED_FIFO")

    def setup() -> None:
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))

    proc = subprocess.Popen(command, preexec_fn=setup, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
