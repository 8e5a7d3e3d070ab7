"""The text report in a real terminal: a pseudo-terminal of 80 and of 120 columns, as a person sees it.

The sample image (``make demo``'s) is audited by the CLI with its stdout on a pty whose window size is
set with ``TIOCSWINSZ`` (no ``COLUMNS``), so the width comes from the terminal as it does for a user.
The output after its header, colour codes removed, is compared with a snapshot per width
(``IMAGELINT_UPDATE_SNAPSHOTS=1`` rewrites them, as in ``test_text_report.py``); every row fits, and
every finding's path is whole.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.formats.test_text_report import ANSI, SAMPLE_CONFIG, SAMPLE_SPEC, check_snapshot
from tests.support import REPO

EXE = str(Path(sys.executable).parent / "imagelint")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(work directory, config): the sample image as ``sample-image`` in it, its waivers pinned."""
    work = tmp_path_factory.mktemp("terminal")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts/make-sample-image.py"),
            str(SAMPLE_SPEC),
            str(work / "sample-image"),
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    config = work / "sample.imagelint.yaml"
    config.write_text(re.sub(r"expires: \S+", "expires: 2999-12-31", SAMPLE_CONFIG.read_text()))
    return work, config


def run_in_terminal(columns: int, *args: str, cwd: Path) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pty of ``columns`` columns: (exit code, what it showed)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES", "NO_COLOR"}}
    proc = subprocess.Popen(
        [EXE, *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=cwd, env=env
    )
    os.close(follower)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return proc.wait(timeout=120), shown.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 120])
def test_the_sample_audit_in_a_terminal(sample: tuple[Path, Path], columns: int) -> None:
    work, config = sample
    code, shown = run_in_terminal(
        columns,
        "audit",
        "sample-image",
        "-c",
        str(config),
        "-f",
        "text",
        "-f",
        f"json:{work}/r{columns}.json",
        cwd=work,
    )
    assert code == 1, shown
    assert "\x1b[" in shown  # a terminal gets colour
    text = ANSI.sub("", shown)
    rows = text.splitlines()
    assert all(len(row) <= columns for row in rows), [row for row in rows if len(row) > columns]
    findings = json.loads((work / f"r{columns}.json").read_text())["findings"]
    for finding in findings:
        if finding.get("waiver"):
            continue
        location = finding["location"]
        assert any(location in row.split() or f"{location}:" in row.split() for row in rows), location
    assert sum(row.startswith("  fix IL") for row in rows) >= 8  # each failing rule's fix is shown
    header, body = text.split("\n\n", 1)  # the header names the temporary path: its length varies
    assert header.startswith("imagelint ") and header.split()[-2:] == ["fail-on", "medium"]
    check_snapshot(f"sample-terminal-{columns}.txt", body.replace(str(REPO), "<REPO>"))
