"""Boot an image tree with its own systemd as PID 1 (systemd-nspawn), for tests that need real systemd.

The container shares this host's kernel; it stays in the caller's memory cgroup, so it cannot stand
in for a host memcg leak, but its systemd, units, restart counters and journal are all real. It has a
network namespace of its own (``--private-network``: only a loopback), so its sshd binds port 22 there,
whatever this machine runs on its own port 22, and containers of several test processes (xdist
workers, another suite on the same machine) never meet on a port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import is_root, need

PRIVATE_NETWORK = ("--private-network",)


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
    network: tuple[str, ...] = PRIVATE_NETWORK,
) -> Iterator[list[str]]:
    """Boot ``root``; yield the ``nsenter`` prefix that runs a command inside once ``ready(prefix)``.

    ``volatile=True`` keeps the tree read-only (changes go to a tmpfs overlay); otherwise the
    container writes into ``root`` (its journal lands in ``root/var/log/journal``). ``console``: a
    file that gets the container's console (systemd's boot status lines, the getty's prompt), as an
    instance's serial console would. ``name`` tells apart two containers booted at once.
    ``network``: nspawn's network options; by default a namespace of its own with only a loopback
    (reached with ``nsenter -n -t PID``: its sshd is on no address of this machine), or e.g.
    ``("--network-namespace-path=/proc/PID/ns/net",)`` (another container's). Never this host's
    network: a port the container binds would meet this machine's own services. On exit the
    container is powered off cleanly (nspawn forwards SIGTERM as a shutdown request); the prefix's
    PID (``prefix[2]``) is the container's init, gone once it powered itself off.
    """
    need(is_root(), "booting a container needs root")
    need(shutil.which("systemd-nspawn") is not None, "systemd-nspawn is not installed")
    need(shutil.which("nsenter") is not None, "nsenter is not installed")
    assert network, "a booted container never shares this host's network"
    yield from _booted(
        root, volatile=volatile, ready=ready, timeout=timeout, console=console, name=name, network=network
    )


def _booted(
    root: Path,
    *,
    volatile: bool,
    ready: Callable[[list[str]], bool],
    timeout: float,
    console: Path | None,
    name: str,
    network: tuple[str, ...],
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


@contextlib.contextmanager
def booted_live(rootfs: Path) -> Iterator[list[str]]:
    """``rootfs`` booted (a volatile overlay), ready once its systemd answers ``systemctl show``: the
    command prefix that runs a program in the container."""
    from imagelint.probes.systemd import collect_live_state

    with booted(rootfs, volatile=True, ready=lambda p: collect_live_state(prefix=p).available) as prefix:
        yield prefix
