"""Helpers for tests: skip-or-fail on missing facilities, and copying image trees."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from imagelint.sampletree import build_tree

__all__ = ["build_tree"]

REPO = Path(__file__).resolve().parent.parent


def need(condition: bool, reason: str) -> None:
    """Skip the calling test when a facility is truly absent, saying which; fail instead on CI."""
    if condition:
        return
    if os.environ.get("IMAGELINT_NO_SKIP") == "1":
        pytest.fail(f"required facility missing on CI: {reason}")
    pytest.skip(reason)


def wait_for(predicate: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` seconds pass (False): wait on the
    condition a test needs instead of sleeping for a fixed time."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


def is_root() -> bool:
    return os.geteuid() == 0


def copy_rootfs(src: Path, dest: Path) -> Path:
    """A private copy of an image tree (hard links are not used: tests may edit files in place)."""
    subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(dest)], check=True)
    return dest


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the installed ``imagelint`` console script as a user would; returns CompletedProcess."""
    import shutil
    import sys

    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout, check=False
    )


# Runs a command and prints the peak RSS (KiB) of it and everything it waited for, on the last line.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "proc = subprocess.run(sys.argv[1:], capture_output=True)\n"
    "sys.stdout.buffer.write(proc.stdout); sys.stderr.buffer.write(proc.stderr)\n"
    "print(f'\\n@@peak {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', end='')\n"
    "sys.exit(proc.returncode)\n"
)


def run_cli_measured(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """:func:`run_cli`, and the peak RSS in MiB of the whole run (imagelint's box and its children)."""
    import shutil
    import sys

    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, exe, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    stdout, _, peak = proc.stdout.rpartition("\n@@peak ")
    proc.stdout = stdout
    return proc, int(peak) / 1024


def clean_image(root: Path) -> Path:
    """Apply the hygiene pack's remediations to an image tree, as a careful image build would."""
    import glob

    for pattern in [
        "etc/ssh/ssh_host_*",
        "var/lib/dbus/machine-id",
        "var/cache/apt/archives/*.deb",
        "var/cache/apt/*.bin",
        "var/lib/systemd/random-seed",
        "root/.*_history",
        "var/log/journal/*/*",
    ]:
        for path in glob.glob(str(root / pattern)):
            os.unlink(path)
    (root / "etc/machine-id").write_text("")
    (root / "var/lib/dbus").mkdir(parents=True, exist_ok=True)
    os.symlink("/etc/machine-id", root / "var/lib/dbus/machine-id")
    dropin = root / "etc/ssh/sshd_config.d"
    if dropin.parent.is_dir():
        dropin.mkdir(exist_ok=True)
        (dropin / "50-image.conf").write_text(
            "PasswordAuthentication no\nPermitRootLogin prohibit-password\n"
        )
    return root
