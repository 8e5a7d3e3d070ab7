"""A report file is this run's, complete, or absent (imagelint/formats/outputs.py): whatever an
earlier run left at a ``-f`` path is gone before this run starts, so a run that fails, is refused or
is killed leaves nothing a pipeline could read as its own; a missing directory is refused up front."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imagelint.formats.outputs import named_paths
from tests.support import os_root, run_cli

PASSING = json.dumps({"verdict": "pass", "note": "left by an earlier run"})


def _stale(tmp_path: Path) -> tuple[Path, Path]:
    json_path, sarif_path = tmp_path / "report.json", tmp_path / "report.sarif"
    for path in (json_path, sarif_path):
        path.write_text(PASSING)
    return json_path, sarif_path


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["audit", "{missing}"], 3),  # the target cannot be read
        (["audit", "{tree}", "--bogus"], 2),  # refused before the run
        (["audit", "{tree}", "-c", "{missing}"], 2),  # a config that is not there
    ],
    ids=["inconclusive", "usage", "config"],
)
def test_a_failed_run_leaves_no_earlier_report_behind(tmp_path: Path, args: list[str], code: int) -> None:
    json_path, sarif_path = _stale(tmp_path)
    tree = os_root(tmp_path / "tree", {"/etc/hostname": "x\n"})
    filled = [a.replace("{missing}", str(tmp_path / "missing")).replace("{tree}", str(tree)) for a in args]
    proc = run_cli(*filled, "-f", f"json:{json_path}", "--format", f"sarif:{sarif_path}")
    assert proc.returncode == code, proc.stderr
    assert not json_path.exists() and not sarif_path.exists()


def test_a_run_that_ends_writes_its_own_complete_report(tmp_path: Path) -> None:
    json_path, _ = _stale(tmp_path)
    tree = os_root(tmp_path / "tree", {"/etc/machine-id": "0123456789abcdef0123456789abcdef\n"})
    proc = run_cli("audit", str(tree), "--select", "IL102", f"-fjson:{json_path}")
    assert proc.returncode == 1 and json.loads(json_path.read_text())["verdict"] == "fail"


def test_a_killed_run_leaves_no_earlier_report_behind(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to clean up: the stale file was gone before the run began."""
    json_path, _ = _stale(tmp_path)
    fifo = tmp_path / "journal"
    os.mkfifo(fifo)  # a journal that never comes: the run waits on it
    tree = os_root(tmp_path / "tree", {"/etc/hostname": "x\n"})
    exe = Path(sys.executable).parent / "imagelint"
    proc = subprocess.Popen(
        [exe, "audit", str(tree), "--journal", str(fifo), "-f", f"json:{json_path}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while json_path.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not json_path.exists()


def test_a_report_named_as_an_input_is_not_removed(tmp_path: Path) -> None:
    tree = os_root(tmp_path / "tree", {"/etc/hostname": "x\n"})
    old = tmp_path / "old.json"
    assert run_cli("audit", str(tree), "-f", f"json:{old}").returncode == 0
    proc = run_cli("diff", str(old), str(tree), "-f", f"json:{old}")
    assert proc.returncode == 0, proc.stderr
    assert "changes" in json.loads(old.read_text())  # read as OLD, then replaced by the diff


def test_a_missing_directory_is_refused_and_not_created(tmp_path: Path) -> None:
    tree = os_root(tmp_path / "tree", {"/etc/hostname": "x\n"})
    proc = run_cli("audit", str(tree), "-f", f"json:{tmp_path}/nonexistent/dir/x.json")
    assert proc.returncode == 2 and "does not exist" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["audit", "/", "-f", "json:a", "--format=sarif:b", "-fjunit:c", "--format", "text:d"], "abcd"),
        (["audit", "/", "-f", "json", "-f", "text:-", "-f", "nope:e", "-f", "json:"], ""),
    ],
)
def test_the_named_paths_are_those_of_known_formats(argv: list[str], named: str) -> None:
    assert [str(p) for p in named_paths(argv)] == list(named)
