"""A disk image audited in a terminal shows a transient "auditing" line with the time elapsed on
stderr; piped (a CI log) it shows nothing, and the report on stdout is the same either way."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

from tests.formats.ci_helpers import sample_image

EXE = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"


def _disk(tmp_path: Path) -> Path:
    raw = tmp_path / "disk.raw"
    tree = sample_image(tmp_path / "tree")
    subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(raw), "64M"], check=True)
    return raw


def _with_terminal_stderr(*args: str, columns: int) -> tuple[int, bytes, bytes]:
    master, slave = os.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([EXE, *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read() if proc.stdout else b""
    os.close(master)
    return proc.wait(timeout=60), out, seen


def test_a_disk_audit_in_a_terminal_shows_a_transient_line(tmp_path: Path) -> None:
    disk = _disk(tmp_path)
    # wide enough for the whole line whatever the temporary directory (its path names the user): a
    # line wider than the terminal is cut with an ellipsis, and "(elapsed)" is what goes
    code, out, terminal = _with_terminal_stderr(
        "audit", str(disk), columns=len(f"auditing {disk} (59.9 s)") + 20
    )
    piped = subprocess.run([EXE, "audit", str(disk)], capture_output=True, check=False)
    assert code == piped.returncode == 1
    assert f"auditing {disk} (".encode() in terminal
    assert b"auditing" not in piped.stderr
    assert out == piped.stdout
