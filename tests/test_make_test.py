"""`make test` as the README's set-up section (and docs/getting-started.md) describes it: the parallel
phase, then the serial one, each naming its ten slowest tests."""

from __future__ import annotations

import shlex
import shutil
import subprocess

from tests.support import REPO, need


def _pytest_runs() -> list[list[str]]:
    """The pytest command lines of ``make test``, as make would run them (``make -n``: nothing runs)."""
    need(shutil.which("make") is not None, "make is not installed")
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "test"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    runs = []
    for command in out.replace("\\\n", " ").split(";"):
        words = shlex.split(command)
        if "pytest" in words:
            runs.append(words[words.index("pytest") + 1 :])
    return runs


def test_the_parallel_phase_then_the_serial_one_each_names_its_ten_slowest_tests() -> None:
    parallel, serial = _pytest_runs()
    assert parallel[parallel.index("-m") + 1] == "not serial" and "-n" in parallel
    assert parallel[parallel.index("--dist") + 1] == "loadfile"
    assert serial[serial.index("-m") + 1] == "serial" and "-n" not in serial
    assert "--durations=10" in parallel and "--durations=10" in serial
