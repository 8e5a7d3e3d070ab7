"""tests/conftest.py's account of a run: one line names and counts skips, xfails and xpasses; under
``IMAGELINT_NO_SKIP=1`` any of them fails the session; a misspelt mark is an error, and so is a
test marked both ``serial`` and ``lane``; pytest's exit 5
(nothing collected) never ends a selection that is simply empty here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

CASES = """
import pytest

def test_runs():
    pass

def test_skipped():
    pytest.skip("no frobnicator here")

def test_skipped_too():
    pytest.skip("no frobnicator here")

@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False

@pytest.mark.xfail(reason="known")
def test_passes_unexpectedly():
    pass
"""


def _pytest(tmp_path: Path, body: str, *args: str, no_skip: bool = False) -> subprocess.CompletedProcess[str]:
    """pytest on one file of ``body`` with this suite's conftest and configuration."""
    (tmp_path / "test_cases.py").write_text(body)
    drop = ("IMAGELINT_NO_SKIP", "PYTEST_ADDOPTS")  # and the xdist worker this test may run in
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_XDIST")}
    env |= {"IMAGELINT_NO_SKIP": "1"} if no_skip else {}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path)]
    argv += ["-p", "tests.conftest", "-p", "no:cacheprovider", "-q", str(tmp_path / "test_cases.py"), *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, check=False)


def test_one_line_names_and_counts_skips_xfails_and_xpasses(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, CASES)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if "skips:" in ln]
    assert "skips: 2 (2 × no frobnicator here)" in line
    assert "xfail: 1 (test_cases.py::test_expected_to_fail)" in line
    assert "xpass: 1 (test_cases.py::test_passes_unexpectedly)" in line


def test_on_ci_an_xfail_or_an_xpass_fails_the_session_as_a_skip_does(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, CASES, "-k", "expected_to_fail or passes_unexpectedly", no_skip=True)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "IMAGELINT_NO_SKIP=1: 2 test(s) not run as written" in proc.stdout, proc.stdout[-3000:]
    proc = _pytest(tmp_path, CASES, "-k", "runs or skipped_too", no_skip=True)
    assert proc.returncode == 1 and "IMAGELINT_NO_SKIP=1: 1 test(s)" in proc.stdout, proc.stdout[-3000:]
    proc = _pytest(tmp_path, CASES, "-k", "test_runs", no_skip=True)
    assert proc.returncode == 0 and "skips: 0 · xfail: 0 · xpass: 0" in proc.stdout, proc.stdout[-3000:]


def test_a_misspelt_mark_is_an_error(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "import pytest\n\n@pytest.mark.serail\ndef test_x():\n    pass\n")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "'serail' not found in `markers`" in out, out[-3000:]


def test_a_test_marked_both_serial_and_lane_is_an_error(tmp_path: Path) -> None:
    body = "import pytest\n\npytestmark = pytest.mark.lane\n\n@pytest.mark.serial\ndef test_x():\n    pass\n"
    proc = _pytest(tmp_path, body)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4 and "a serial test runs alone, not in the lane" in out, out[-3000:]


def test_a_selection_that_holds_no_test_here_passes_and_a_run_without_tests_fails(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, CASES, "-m", "serial")
    assert proc.returncode == 0 and "no test selected" in proc.stdout, proc.stdout[-3000:]
    proc = _pytest(tmp_path, "# no test in here\n")
    assert proc.returncode == 1 and "no test found" in proc.stdout, proc.stdout[-3000:]


SIGNAL_CASES = """
import signal

def test_leaves_sigint_blocked():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

def test_leaves_sigint_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)

def test_restores_what_it_changed():
    old = signal.signal(signal.SIGTERM, lambda *args: None)
    signal.signal(signal.SIGTERM, old)

def test_after_them_all_is_as_found():
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
"""


def test_a_test_that_leaves_a_signal_blocked_or_ignored_fails_by_name_and_is_undone(tmp_path: Path) -> None:
    """Every imagelint a worker starts inherits a blocked or ignored signal: the test that left it
    fails, named, and the next test finds the worker as it was."""
    proc = _pytest(tmp_path, SIGNAL_CASES)
    assert proc.returncode == 1, proc.stdout[-3000:]
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("ERROR ")]
    assert [ln.split(" - ")[0] for ln in errors] == [
        "ERROR test_cases.py::test_leaves_sigint_blocked",
        "ERROR test_cases.py::test_leaves_sigint_ignored",
    ], proc.stdout[-3000:]
    said = "\nthe test left signals blocked or handled otherwise: SIGINT\n"
    assert proc.stdout.count(said) == 2, proc.stdout[-3000:]
    assert "4 passed, 2 errors" in proc.stdout, proc.stdout[-3000:]
