"""Every command, every channel: names from the image cannot forge a line, a workflow command or a
terminal sequence on stdout, stderr or in a written file.

The image holds units and drop-ins named with a newline followed by ``::error::``, ESC sequences,
a bidi override (U+202E) and an undecodable byte, enabled so that rules report them. Each command
that shows image strings runs end to end (the real console script), and every channel it writes is
checked the same way.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.support import Measured, os_root, run_cli_measured

HOSTILE = [
    b"a\n::error file=x,line=1::forged\n",
    b"esc\x1b[2J\x1b]0;title\x07",
    b"bidi\xe2\x80\xaeforged",
    b"raw\xffbyte",
]
# A raw C0/C1 control, a bidi control, a line separator or a lone surrogate on any channel is a leak.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def _write(path: bytes, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def hostile_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "image"
    base = os.fsencode(root)
    _write(base + b"/etc/os-release", b"ID=debian\n")
    wants = base + b"/etc/systemd/system/multi-user.target.wants/"
    os.makedirs(wants)
    # unit names are limited to systemd's characters (others are not units at all), "::" among them;
    # drop-in names and the values in them are anything
    for number, hostile in enumerate(HOSTILE):
        name = b"x::error::forged-%d.service" % number
        _write(base + b"/etc/systemd/system/" + name, b"[Service]\nExecStart=/bin/true\n")
        value = hostile.replace(b"\n", b" ")
        _write(
            base + b"/etc/systemd/system/" + name + b".d/" + hostile + b".conf",
            b"[Service]\nExecStart=\nExecStart=/usr/bin/absent-" + value + b"\nRestart=always\n",
        )
        os.symlink(b"/etc/systemd/system/" + name, wants + name)
    _write(base + b"/usr/lib/systemd/system/multi-user.target", b"[Unit]\nDescription=m\n")
    os.symlink("multi-user.target", root / "usr/lib/systemd/system/default.target")
    return os_root(root)  # the marks of an OS root besides (an init, /usr/bin)


# The github format's own annotations: a command imagelint writes, titled with a rule id
OWN_COMMAND = re.compile(r"::(error|warning|notice) (file=[^,:]*,(line=\d+,)?)?title=IL\d+ [^:]*::")


def _check_channel(name: str, text: str) -> None:
    assert not RAW.search(text), f"{name}: raw control or bidi character: {RAW.search(text)!r}"
    for line in text.splitlines():
        if line.lstrip().startswith("::"):
            assert OWN_COMMAND.match(line), f"{name}: line starts a workflow command: {line!r}"
        assert "##[" not in line, f"{name}: legacy workflow command: {line!r}"


def _check_run(args: list[str], proc: object, files: list[Path]) -> None:
    assert isinstance(proc, Measured)
    stdout, stderr = proc.stdout, proc.stderr
    assert "Traceback" not in stderr, stderr
    assert proc.stdout_chars == len(stdout), "the whole of stdout is checked"
    proc.assert_within_memory()
    _check_channel(f"{args} stdout", stdout)
    _check_channel(f"{args} stderr", stderr)
    for path in files:
        _check_channel(f"{args} {path.name}", path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit", "github", "markdown", "html"])
def test_audit_in_every_format(hostile_image: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"report.{fmt}"
    summary = tmp_path / "summary.md"
    args = ["audit", str(hostile_image), "-f", fmt, "-f", f"{fmt}:{out}"]
    proc = run_cli_measured(*args, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1, proc.stderr
    files = [out] + ([summary] if summary.exists() else [])
    _check_run(args, proc, files)
    assert "forged" in out.read_text()  # the names are there, escaped, not dropped


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_units_listing(hostile_image: Path, fmt: str) -> None:
    args = ["units", str(hostile_image), "--format", fmt]
    proc = run_cli_measured(*args)
    assert proc.returncode == 0, proc.stderr
    _check_run(args, proc, [])
    assert "forged" in proc.stdout
    if fmt == "json":
        units = {u["name"] for u in json.loads(proc.stdout)["units"]}
        assert "x::error::forged-0.service" in units  # the same value, escaped as JSON


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_diff_against_a_clean_image(hostile_image: Path, tmp_path: Path, fmt: str) -> None:
    clean = os_root(tmp_path / "clean")
    args = ["diff", str(clean), str(hostile_image), "-f", fmt]
    proc = run_cli_measured(*args)
    assert proc.returncode in (0, 1), proc.stderr
    _check_run(args, proc, [])
    assert "forged" in proc.stdout


def test_error_messages_on_stderr(tmp_path: Path) -> None:
    missing = tmp_path / "gone\n::error file=x,line=1::forged\x1b[2J\u202e"
    for args in (["audit", str(missing)], ["units", str(missing)], ["diff", str(missing), str(missing)]):
        proc = run_cli_measured(*args)
        assert proc.returncode in (2, 3), (args, proc.stderr)
        assert proc.stderr.count("\n") == 1, (args, proc.stderr)
        _check_run(args, proc, [])
        assert "forged" in proc.stderr
