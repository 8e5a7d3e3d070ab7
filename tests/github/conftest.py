"""Fixtures of the Action's tests: the runner's user, with and without sudo, and a directory it reaches."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import need

USER = "imagelint-runner"


@pytest.fixture()
def plain_user() -> str:
    """An unprivileged user (made once per machine), as a runner's user without sudo."""
    need(os.geteuid() == 0, "creating a user and its sudoers entry needs root")
    need(shutil.which("useradd") is not None and shutil.which("runuser") is not None, "no useradd/runuser")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", USER], check=True)
    return USER


@pytest.fixture()
def runner_user(plain_user: str) -> Iterator[str]:
    """That user with passwordless sudo, as on GitHub-hosted runners (the entry removed afterwards)."""
    need(shutil.which("sudo") is not None, "sudo is not installed (scripts/install.sh --test installs it)")
    sudoers = Path(f"/etc/sudoers.d/imagelint-test-{os.getpid()}")
    sudoers.write_text(f"{plain_user} ALL=(ALL) NOPASSWD: ALL\n")
    sudoers.chmod(0o440)
    try:
        subprocess.run(["visudo", "-cqf", str(sudoers)], check=True)
        yield plain_user
    finally:
        sudoers.unlink()


@pytest.fixture()
def shared_dir() -> Iterator[Path]:
    """A directory the user can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="imagelint-runner-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)
