"""Helpers for tests: skip-or-fail on missing facilities, and copying image trees."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagelint.sampletree import build_image, build_tree
from tests.treerss import MAX_RSS_MIB, run_tree

__all__ = ["MAX_RSS_MIB", "build_tree"]


def os_root(root: Path, entries: dict[str, object] | None = None) -> Path:
    """A crafted tree the CLI may audit: ``entries`` over the marks of an OS root (without them the run
    is inconclusive, exit 3, unless --allow-partial-root)."""
    return build_image(root, entries or {})


def half_extracted_root(root: Path) -> Path:
    """A usr-merged root tarball cut short: an os-release, /usr and the init's links, not the init."""
    return build_tree(
        root,
        {
            "/etc/os-release": "ID=debian\n",
            "/usr/bin/true": "",
            "/lib": {"link": "usr/lib"},
            "/sbin": {"link": "usr/sbin"},
            "/usr/sbin/init": {"link": "/lib/systemd/systemd"},
            "/etc/systemd/system/multi-user.target.wants/ecs.service": {
                "link": "/usr/lib/systemd/system/ecs.service"
            },
        },
    )


REPO = Path(__file__).resolve().parent.parent


def need(condition: bool, reason: str) -> None:
    """Skip the calling test when a facility is truly absent, saying which; fail instead on CI."""
    if condition:
        return
    if os.environ.get("IMAGELINT_NO_SKIP") == "1":
        pytest.fail(f"required facility missing on CI: {reason}")
    pytest.skip(reason)


MARKS_ENV = "IMAGELINT_TEST_MARKS"  # the running test's marks, comma-separated (tests/conftest.py)


def must_be_marked(mark: str, what: str) -> None:
    """Fail the calling test unless it carries ``mark``: what the mark selects (``serial``: run alone;
    ``cgroup_v1``: left out where the machine has no v1 memory hierarchy) must say what the test does."""
    if mark not in os.environ.get(MARKS_ENV, "").split(","):
        pytest.fail(f"{what}: mark the test @pytest.mark.{mark}")


def must_run_alone(what: str) -> None:
    """Fail the calling test unless it is marked ``serial`` (see tests/conftest.py): ``what`` (a
    pinned CPU load, a count of the host's memory cgroups) must not run beside other tests."""
    must_be_marked("serial", f"{what}, it must not run beside other tests")


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


def cache_root() -> Path:
    """The machine-wide cache of the tests (``IMAGELINT_TEST_CACHE``, else ``~/.cache/imagelint-tests``)."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg / "imagelint-tests"))


def is_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def loop_devices_work() -> bool:
    """Whether this process can attach a file to a loop device (root, util-linux, and a machine that
    lends loop devices: a container often has none)."""
    import shutil
    import tempfile

    if not is_root() or shutil.which("losetup") is None:
        return False
    with tempfile.NamedTemporaryFile() as backing:
        backing.truncate(1 << 20)
        attach = subprocess.run(
            ["losetup", "--find", "--show", backing.name], capture_output=True, text=True, check=False
        )
        if attach.returncode != 0:
            return False
        subprocess.run(["losetup", "-d", attach.stdout.strip()], capture_output=True, check=False)
    return True


def copy_rootfs(src: Path, dest: Path) -> Path:
    """A private copy of an image tree (hard links are not used: tests may edit files in place)."""
    subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(dest)], check=True)
    return dest


def as_a_foreground_job() -> None:
    """``preexec_fn`` for an imagelint a test interrupts: SIGINT, SIGQUIT and SIGHUP at their defaults,
    as a terminal's foreground job has them. A script's background job (``nohup make test &``)
    ignores them, an ignored signal is inherited across exec, and imagelint rightly leaves it
    ignored: a test of Ctrl-C would then wait out the whole run."""
    for number in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the installed ``imagelint`` console script as a user would; returns CompletedProcess."""
    import shutil
    import sys

    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout, check=False
    )


@dataclass
class Measured:
    returncode: int | None  # None: still running at the timeout
    stderr: str
    stdout: str  # its tail (tests.treerss.TAIL)
    peak_mib: float  # of the whole process tree (tests/treerss.py)
    stdout_chars: int = 0

    def assert_one_line(self, code: int, *words: str) -> None:
        """Ended with ``code``, one stderr line holding ``words``, within the RSS bound."""
        lines = self.stderr.splitlines()
        assert self.returncode == code, (self.returncode, self.stderr[-2000:], self.stdout[-2000:])
        assert len(lines) == 1, self.stderr[-2000:]
        assert "Traceback" not in self.stderr and "internal error" not in self.stderr
        for word in words:
            assert word in lines[0], lines[0]
        self.assert_within_memory()

    def assert_within_memory(self) -> None:
        assert self.peak_mib <= MAX_RSS_MIB, f"peak RSS of the process tree {self.peak_mib:.0f} MiB"


def run_cli_measured(
    *args: str, timeout: float = 90, address_space: int = 0, env: dict[str, str] | None = None
) -> Measured:
    """``imagelint ARGS`` as a user runs it, with the peak RSS of its whole process tree; a CLI still
    running after ``timeout`` s has ``returncode`` None."""
    import shutil

    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    run = run_tree([exe, *args], timeout=timeout, env=full_env, address_space=address_space)
    return Measured(run.returncode, run.stderr, run.stdout, run.peak_mib, run.stdout_chars)


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


@contextlib.contextmanager
def alarm_after(seconds: int, hung: Callable[[], Exception]) -> Iterator[None]:
    """Raise ``hung()`` if the block runs past ``seconds`` (SIGALRM interrupts pure-Python loops): a
    hang becomes the caller's own problem, never a stuck suite."""

    def expired(signum: int, frame: object) -> None:
        raise hung()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
