"""Peak resident memory of a command's whole process tree, for the tests and the benchmarks alike.

The imagelint CLI forks: the process a test starts only waits, and the work (and the memory) is its
boxed child's (``imagelint/cli/box.py``). The peak of the process a test started says nothing.

How the tree is measured, and why this way: :func:`run_tree` starts a fresh *measuring* Python process
(this file, run as a script) whose only child is the command. When the command ends, the measuring
process reads ``getrusage(RUSAGE_CHILDREN).ru_maxrss``: on Linux that is the largest peak RSS of any
descendant that was waited for, because a process that reaps a child takes over the child's own
children's maximum too (``cmaxrss``). The box's parent always reaps its child, so the figure covers
the grandchild that does the work. It is a maximum over processes, not a sum: the box's parent holds
no state (a few MiB of interpreter while its child runs), so the maximum is the worker's own peak, and
unlike polling ``/proc`` it cannot miss a short spike. The measuring process is fresh so that nothing
else it ran (the test's earlier tools) enters the figure; it is not itself counted.

A process that does not end (``imagelint watch`` in a benchmark) cannot be reaped for its figure:
:func:`tree_usage` sums RSS and CPU time over the process and all its live descendants from ``/proc``
instead, polled by the caller.

Standard library only, and no import of imagelint: the benchmarks import it as ``tests.treerss``
beside the tests, and it runs as the measuring script.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAX_RSS_MIB = 150  # what every hostile-input test allows the whole tree
TAIL = 1 << 20  # characters of stdout and stderr kept (a runaway report can be 100 MB)


@dataclass(frozen=True)
class TreeRun:
    """What the command did: exit code (None: killed at the timeout), output, the tree's peak RSS."""

    returncode: int | None
    stdout: str  # the last TAIL characters
    stdout_chars: int  # how much it wrote in all
    stderr: str
    peak_kib: int
    seconds: float

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_tree(
    cmd: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    address_space: int = 0,
) -> TreeRun:
    """Run ``cmd`` as the only child of a fresh measuring process; at ``timeout`` seconds its whole
    session is killed. ``address_space`` (bytes, 0: none) caps the command with ``RLIMIT_AS``."""
    proc = subprocess.run(
        [sys.executable, "-I", str(Path(__file__).resolve()), str(timeout), str(address_space), *cmd],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout + 60, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the measuring process failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return TreeRun(**json.loads(proc.stdout))


def tree_usage(pid: int) -> tuple[int, float]:
    """(RSS bytes, CPU seconds) summed over ``pid`` and every live descendant, from ``/proc``.

    CPU counts each process's own time and that of the children it has reaped (so a child that
    ended is not lost); a process that ends between two polls loses what it did since the last."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while listed
        parents[int(entry)] = int(fields[1])
        stats[int(entry)] = fields
    tree = {pid}
    grew = True
    while grew:
        found = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= found
        grew = bool(found)
    rss = cpu = 0
    for member in tree & stats.keys():
        fields = stats[member]
        cpu += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        rss += int(fields[21]) * page
    return rss, cpu / tick


def _measure(timeout: float, address_space: int, cmd: list[str]) -> dict[str, object]:
    def cap() -> None:
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    started = time.monotonic()
    # its own session, so that a timeout kills the boxed grandchild too
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
        preexec_fn=cap, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = child.communicate(timeout=timeout)
        code: int | None = child.returncode
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        code = None
    return {
        "returncode": code,
        "stdout": stdout[-TAIL:],
        "stdout_chars": len(stdout),
        "stderr": stderr[-TAIL:],
        "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        "seconds": time.monotonic() - started,
    }


if __name__ == "__main__":
    print(json.dumps(_measure(float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])))
