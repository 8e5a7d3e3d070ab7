"""Boot an image tree with its own systemd as PID 1 (systemd-nspawn), for tests that need real systemd.

The container shares this host's kernel; it stays in the caller's memory cgroup, so it cannot stand
in for a host memcg leak, but its systemd, units, restart counters and journal are all real. It also
shares this host's network: two containers booted by different test processes (xdist workers) would
both start sshd on port 22 and the second one's would fail, so only one process at a time has
containers up (a machine-wide lock; one process may boot several at once, as a fleet test does).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import cache_root, is_root, need

_UP: list[int] = [0]  # containers this process has up: the lock is held while it is not 0
_LOCK: list[int] = []  # the lock file's descriptor while held


@contextlib.contextmanager
def _host_network() -> Iterator[None]:
    """The machine-wide container lock (in the test cache), held for the block; re-entrant in a process."""
    if _UP[0] == 0:
        cache = cache_root()
        cache.mkdir(parents=True, exist_ok=True)
        fd = os.open(cache / "nspawn.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _LOCK.append(fd)
    _UP[0] += 1
    try:
        yield
    finally:
        _UP[0] -= 1
        if _UP[0] == 0:
            os.close(_LOCK.pop())  # closing the only descriptor releases the lock


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


@contextlib.contextmanager
def booted(
    root: Path,
    *,
    volatile: bool,
    ready: Callable[[list[str]], bool],
    timeout: float = 60,
    console: Path | None = None,
    name: str = "",
    network: tuple[str, ...] = (),
) -> Iterator[list[str]]:
    """Boot ``root``; yield the ``nsenter`` prefix that runs a command inside once ``ready(prefix)``.

    ``volatile=True`` keeps the tree read-only (changes go to a tmpfs overlay); otherwise the
    container writes into ``root`` (its journal lands in ``root/var/log/journal``). ``console``: a
    file that gets the container's console (systemd's boot status lines, the getty's prompt), as an
    instance's serial console would. ``name`` tells apart two containers booted at once.
    ``network``: nspawn's network options, e.g. ``("--private-network",)`` (a namespace of its own
    with only a loopback, reached with ``nsenter -n -t PID``: its sshd is on no address of this
    machine) or ``("--network-namespace-path=/proc/PID/ns/net",)`` (another container's). On exit the
    container is powered off cleanly (nspawn forwards SIGTERM as a shutdown request); the prefix's
    PID (``prefix[2]``) is the container's init, gone once it powered itself off.
    """
    need(is_root(), "booting a container needs root")
    need(shutil.which("systemd-nspawn") is not None, "systemd-nspawn is not installed")
    need(shutil.which("nsenter") is not None, "nsenter is not installed")
    with _host_network():
        yield from _booted(
            root,
            volatile=volatile,
            ready=ready,
            timeout=timeout,
            console=console,
            name=name,
            network=network,
        )


def _booted(
    root: Path,
    *,
    volatile: bool,
    ready: Callable[[list[str]], bool],
    timeout: float,
    console: Path | None,
    name: str,
    network: tuple[str, ...] = (),
) -> Iterator[list[str]]:
    argv = ["systemd-nspawn", "-q", "-D", str(root), "--register=no", "--keep-unit", *network]
    argv += ["--volatile=overlay"] if volatile else []
    argv += ["-M", f"il-test-{os.getpid()}{name}", "--boot"]
    out = console.open("wb") if console is not None else None
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=out or subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            kids = _children(proc.pid)
            if kids:
                prefix = ["nsenter", "-t", str(kids[0]), "-m", "-u", "-i", "-n", "-p"]
                if ready(prefix):
                    break
            time.sleep(0.3)
        else:
            err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            pytest.fail(f"the container did not come up: {err}")
        yield prefix
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if out is not None:
            out.close()
