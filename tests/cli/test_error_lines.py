"""Every usage and runtime error of the command line is one line on stderr, without box drawing,
with its documented exit code: 2 for bad usage (with where the help is), 3 for a target that is
missing or cannot be read (like any other unreadable data)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import is_root, need, run_cli

BOX = set("╭╮╰╯│─")


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert not BOX & set(stderr), stderr
    assert lines[0].startswith("imagelint: error: "), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["audit", "--bogus", "/"], ["No such option: --bogus", "see 'imagelint audit -h'"]),
        (["bogus"], ["No such command 'bogus'", "see 'imagelint -h'"]),
        (["audit", "/", "--fail-on", "loud"], ["--fail-on 'loud'"]),
        (["rules", "show"], ["Missing argument", "see 'imagelint rules show -h'"]),
        (["audit", "/", "-f", "sarif", "--sarif-anchor", "/nonexistent"], ["--sarif-anchor", "/nonexistent"]),
        (["soak", "--duration", "soon"], ["soon"]),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(args: list[str], words: list[str]) -> None:
    proc = run_cli(*args)
    line = _one_line(proc.stderr)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    for word in words:
        assert word in line, line


def test_no_command_prints_the_help_and_exits_2() -> None:
    proc = run_cli()
    assert proc.returncode == 2 and "Usage: imagelint" in proc.stdout and proc.stderr == ""


@pytest.mark.parametrize(
    "command",
    [["audit", "{}"], ["units", "{}"], ["diff", "{}", "/"], ["soak", "--from-bundle", "{}"]],
    ids=lambda c: c[0],
)
@pytest.mark.parametrize("kind", ["missing", "unreadable directory", "unreadable file"])
def test_a_target_that_is_missing_or_unreadable_is_one_line_and_exit_3(
    tmp_path: Path, command: list[str], kind: str
) -> None:
    """As a user who may not read it (root may read anything: the test drops to nobody)."""
    need(is_root(), "drops privileges to nobody with setpriv")
    target = tmp_path / ("missing" if kind == "missing" else "secret")
    if kind == "unreadable directory":
        target.mkdir(mode=0o700)
    elif kind == "unreadable file":
        target.write_bytes(b"\0" * 4096)
        target.chmod(0o600)
    args = [a.replace("{}", str(target)) for a in command]
    exe = Path(sys.executable).parent / "imagelint"
    proc = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(exe), *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "HOME": str(tmp_path), "NO_COLOR": "1", "IMAGELINT_NO_CACHE": "1"},
    )  # fmt: skip
    line = _one_line(proc.stderr)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert str(target) in line, line
