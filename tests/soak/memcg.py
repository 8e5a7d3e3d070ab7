"""Real dying memory cgroups for tests: a leaking "restarter" on the host's v1 memory hierarchy.

Each restart is what a crash-looping unit does to the kernel: make a memory cgroup, run a short
process in it that writes a few MB to a file (page cache charged to that cgroup), let it exit, and
remove the cgroup. The page cache keeps the memcg alive as a dying one until it is freed.

:class:`MemcgLab` owns one parent cgroup and one scratch directory and removes everything it made
in :meth:`MemcgLab.cleanup` (files deleted, ``sync``, caches dropped, directories removed), which
tests call from a fixture finaliser so it runs when they fail too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tests.support import must_be_marked, must_run_alone, need

T = TypeVar("T")

V1_MEMORY = Path("/sys/fs/cgroup/memory")


def memory_num_cgroups() -> int:
    for line in Path("/proc/cgroups").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "memory":
            return int(parts[2])
    raise RuntimeError("no memory row in /proc/cgroups")


def v1_memory_writable() -> tuple[bool, str]:
    """Whether this process can make memory cgroups under the v1 memory mount (tries it)."""
    if os.geteuid() != 0:
        return False, "making memory cgroups needs root"
    if not (V1_MEMORY / "memory.usage_in_bytes").exists():
        return False, f"no cgroup v1 memory hierarchy at {V1_MEMORY}"
    probe = V1_MEMORY / f"imagelint-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as exc:
        return False, f"cannot create a memory cgroup under {V1_MEMORY}: {exc.strerror}"
    probe.rmdir()
    return True, ""


def need_v1_memory() -> None:
    """The calling test makes memory cgroups on the v1 hierarchy: it is marked ``cgroup_v1`` (deselected
    where the machine has only cgroup v2, as GitHub's runners), and skipped (failed on CI) when this
    process cannot make them."""
    must_be_marked("cgroup_v1", "memory cgroups made on the v1 hierarchy")
    ok, reason = v1_memory_writable()
    need(ok, reason)


def drop_caches() -> None:
    os.sync()
    with contextlib.suppress(OSError):
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


class MemcgLab:
    """A parent memory cgroup and a scratch directory; restarts that leak (or not) happen under it."""

    def __init__(self, name: str) -> None:
        must_run_alone("dying memory cgroups counted host-wide")
        must_be_marked("cgroup_v1", "memory cgroups made on the v1 hierarchy")
        self.parent = V1_MEMORY / f"imagelint-{name}-{os.getpid()}"
        self.parent.mkdir()
        # on disk, not tmpfs, so the pages are ordinary page cache, as in the incident
        self.scratch = Path(tempfile.mkdtemp(prefix="imagelint-memcg-", dir="/var/tmp"))
        self.restarts = 0
        self.leaked = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def restart_once(self, *, leak: bool = True, mbytes: int = 2) -> None:
        """One "restart": cgroup made, a process writes page cache in it and exits, cgroup removed.

        With ``leak=False`` the file is deleted before the rmdir, so nothing pins the memcg.
        """
        with self._lock:
            i = self.restarts
            self.restarts += 1
        cg = self.parent / f"run-{i}"
        data = self.scratch / f"run-{i}.dat"
        cg.mkdir()
        try:
            script = f'echo $$ > "{cg}/cgroup.procs" && exec dd if=/dev/zero of="{data}" bs=1M count={mbytes}'
            subprocess.run(["sh", "-c", script + " status=none"], check=True, timeout=30)
            if not leak:
                data.unlink()
        finally:
            for _ in range(50):  # the exited task can take a moment to leave the cgroup
                try:
                    cg.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
        if leak:
            with self._lock:
                self.leaked += 1

    def start(self, period: float, *, leak: bool = True) -> None:
        """Restart every ``period`` seconds in a background thread until :meth:`stop` (again after it)."""
        self._stop.clear()

        def loop() -> None:
            next_at = time.monotonic()
            while not self._stop.is_set():
                try:
                    self.restart_once(leak=leak)
                except Exception as exc:  # reported by the test, never silently
                    self.errors.append(repr(exc))
                next_at += period
                self._stop.wait(max(0.0, next_at - time.monotonic()))

        self._thread = threading.Thread(target=loop, name="memcg-restarter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def cleanup(self) -> None:
        """Remove everything: stop, delete the files, sync and drop caches, remove the cgroups."""
        self.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)
        drop_caches()
        if self.parent.exists():
            for child in sorted(self.parent.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    with contextlib.suppress(OSError):
                        child.rmdir()
            for _ in range(50):
                try:
                    self.parent.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def judged_against_noise(attempt: Callable[[], T], quiet: Callable[[T], bool], tries: int = 3) -> T:
    """Run ``attempt`` until ``quiet(result)`` holds, at most ``tries`` times; return the last result.

    For the tests that expect *no* growth: the v1 dying count is host-wide, so anything else on the
    machine (another test run, a container shutting down) can make a clean soak see growth. A wrong
    detector fails every attempt; a burst of background churn does not repeat on cue. Before each
    retry the page cache is dropped, which frees the dying memcgs that others left behind.

    The kernel can also free them on its own: this project's CI machines run DAMON with a
    ``pageout`` scheme (``/sys/kernel/mm/damon/admin/kdamonds``), which pages out cache it finds
    cold and so releases the dying memcgs it pinned, in batches, mid-soak (seen: 20 → 6 in 0.1 s
    with a QEMU guest beside the test). The leak tests therefore soak long enough (40 s) that
    such a batch does not flatten the whole series.
    """
    must_run_alone("a host-wide memory cgroup count judged against noise")
    result = attempt()
    for _ in range(tries - 1):
        if quiet(result):
            break
        drop_caches()
        result = attempt()
    return result
