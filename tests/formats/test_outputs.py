"""A report file is this run's, complete, or absent (imagelint/formats/outputs.py): whatever an
earlier run left at a ``-f`` path is gone before this run starts, so a run that fails, is refused or
is killed leaves nothing a pipeline could read as its own; a missing directory is refused up front."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from imagelint.formats.outputs import named_paths
from tests.support import build_tree, is_root, need, os_root, run_cli

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


OS_ROOT = {"/etc/os-release": "ID=debian\n", "/usr/bin": {"directory": True}, "/usr/lib/systemd/systemd": ""}
OTHER_UID = 54321


def _os_tree(where: Path) -> Path:
    return build_tree(where, {**OS_ROOT, "/etc/hostname": "x\n"})


def _plant(kind: str, path: Path, canary: Path) -> str:
    """Put ``kind`` at ``path``; what the refusal says about it."""
    if kind == "link":
        os.symlink(canary, path)
        return "is a symbolic link"
    if kind == "fifo":
        os.mkfifo(path)
        return "is a FIFO"
    if kind == "directory":
        path.mkdir()
        return "is a directory"
    need(is_root(), "chown to another uid needs root")
    path.write_text(PASSING)
    os.chown(path, OTHER_UID, OTHER_UID)
    return f"is owned by uid {OTHER_UID}"


def _command(kind: str, tree: Path, out: Path) -> list[str]:
    """One command line per writer of -f: audit, units and diff all go through write_outputs."""
    return {
        "audit": ["audit", str(tree), "-f", f"json:{out}"],
        "units": ["units", str(tree), "-f", f"json:{out}"],
        "diff": ["diff", str(tree), str(tree), f"--format=json:{out}"],
        "docs": ["docs", "rules", "-o", str(out)],
    }[kind]


@pytest.mark.parametrize("command", ["audit", "units", "diff", "docs"])
@pytest.mark.parametrize("kind", ["link", "fifo", "directory", "another user's file"])
def test_a_planted_output_path_is_refused_in_one_line_and_left_alone(
    tmp_path: Path, command: str, kind: str
) -> None:
    """A link committed in a checkout, or planted in a shared /tmp, must not get the file it names
    replaced or deleted (the stale cleaner deleted it, the writer renamed onto it); a FIFO must not
    hang the run; another user's file is theirs."""
    tree = _os_tree(tmp_path / "tree")
    canary = tmp_path / "victim" / "profile.sh"
    canary.parent.mkdir()
    canary.write_text("the victim's file\n")
    canary.chmod(0o600)
    out = tmp_path / "report.json"
    why = _plant(kind, out, canary)
    before = out.lstat()
    proc = run_cli(*_command(command, tree, out), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and why in proc.stderr and str(out) in proc.stderr
    assert canary.read_text() == "the victim's file\n" and canary.stat().st_mode & 0o777 == 0o600
    after = out.lstat()
    assert (after.st_ino, after.st_mode, after.st_uid) == (before.st_ino, before.st_mode, before.st_uid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "tree", "victim"]  # no temporary


def test_docs_rules_into_a_missing_directory_is_one_usage_line(tmp_path: Path) -> None:
    proc = run_cli("docs", "rules", "-o", str(tmp_path / "no" / "rules.md"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "does not exist" in proc.stderr
    assert not (tmp_path / "no").exists()


def test_two_outputs_to_one_file_are_refused(tmp_path: Path) -> None:
    tree = _os_tree(tmp_path / "tree")
    out = tmp_path / "r"
    proc = run_cli("audit", str(tree), "-f", f"json:{out}", "-f", f"sarif:{tmp_path}/./r")
    assert proc.returncode == 2 and "same file" in proc.stderr and not out.exists()


def test_in_a_shared_sticky_directory_another_users_report_is_refused_as_non_root() -> None:
    """The shared /tmp case, as an ordinary user: root's file there is neither removed nor replaced."""
    need(is_root() and shutil.which("setpriv") is not None, "needs root to set up, setpriv to drop to nobody")
    with tempfile.TemporaryDirectory(prefix="imagelint-shared-") as shared:
        os.chmod(shared, 0o1777)
        tree = _os_tree(Path(shared) / "tree")
        theirs = Path(shared) / "report.json"
        theirs.write_text(PASSING)
        theirs.chmod(0o666)  # writable by anyone: still not nobody's to replace
        exe = Path(sys.executable).parent / "imagelint"
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(exe),
             "audit", str(tree), "-f", f"json:{theirs}"],
            capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "HOME": shared},
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert "is owned by uid 0" in proc.stderr and len(proc.stderr.splitlines()) == 1
        assert theirs.read_text() == PASSING and theirs.stat().st_uid == 0
