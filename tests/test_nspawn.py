"""tests/nspawn.py: a booted container has a network namespace of its own, so its sshd binds port 22
there while this machine's port 22 is taken (a developer's sshd, another suite's container)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.probes.systemd import collect_live_state
from tests.nspawn import booted


@contextlib.contextmanager
def _port_22_taken() -> Iterator[None]:
    """This machine's port 22 in use for the block: held by this test when it is free, else already
    held by someone (this machine's sshd)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", 22))
            sock.listen()
        except OSError:
            pass  # taken already
        yield


@pytest.mark.root
@pytest.mark.slow
def test_a_booted_container_runs_sshd_in_its_own_network_while_the_hosts_port_22_is_taken(
    debian_rootfs: Path,
) -> None:
    def sshd_settled(prefix: list[str]) -> bool:
        state = collect_live_state(prefix=prefix)
        ssh = state.units.get("ssh.service") if state.available else None
        return ssh is not None and ssh.active_state in ("active", "failed")

    with _port_22_taken(), booted(debian_rootfs, volatile=True, ready=sshd_settled) as prefix:
        init = prefix[prefix.index("-t") + 1]
        assert os.readlink(f"/proc/{init}/ns/net") != os.readlink("/proc/self/ns/net")
        ssh = collect_live_state(prefix=prefix).units["ssh.service"]
        assert ssh.active_state == "active", ssh
