"""tests/nspawn.py's machine-wide lock: containers share the host's network (sshd on port 22), so
only one test process at a time has containers up; one process may boot several at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.nspawn import _host_network
from tests.support import cache_root

TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)
"""


def _another_process_may_boot() -> bool:
    lock = cache_root() / "nspawn.lock"
    return subprocess.run([sys.executable, "-c", TRY_LOCK, str(lock)], check=False).returncode == 0


def test_the_lock_is_held_while_a_process_has_containers_up_and_nests_within_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cache of its own: the machine's lock may be held by another worker's containers right now
    monkeypatch.setenv("IMAGELINT_TEST_CACHE", str(tmp_path))
    with _host_network():
        assert not _another_process_may_boot()
        with _host_network():  # a second container of the same process (a fleet of two)
            assert not _another_process_may_boot()
        assert not _another_process_may_boot()  # the first one is still up
    assert _another_process_may_boot()
