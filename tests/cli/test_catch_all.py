"""The catch-all: an unforeseen error is one line and exit 3 (never 1, which means findings), no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import os_root, run_cli

# The engine breaks as a bug would, after the image was opened; imagelint.cli.main() runs as usual.
BROKEN = (
    "import sys\n"
    "import imagelint.engine\n"
    "def broken(*args, **kwargs):\n"
    "    raise TypeError('unsupported operand')\n"
    "imagelint.engine.decide = broken\n"
    "sys.argv = ['imagelint', *sys.argv[1:]]\n"
    "from imagelint.cli import main\n"
    "main()\n"
)


def _broken(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BROKEN, *args], capture_output=True, text=True, timeout=120)


def test_an_internal_error_is_one_line_exit_3_and_names_where(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    proc = _broken("audit", str(root))
    assert proc.returncode == 3
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"imagelint: error: {root}: internal error: TypeError at imagelint/")
    assert lines[0].endswith(
        ": unsupported operand; inconclusive. Please report it with the traceback --debug prints"
    )


def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    proc = _broken("audit", str(root), "--debug")
    assert proc.returncode == 3
    assert proc.stderr.startswith("imagelint: error: ")
    assert "Traceback (most recent call last):" in proc.stderr
    assert "TypeError: unsupported operand" in proc.stderr


def test_an_image_whose_first_read_fails_with_eio_is_one_line_exit_3() -> None:
    # /proc/self/mem is a regular file whose read at offset 0 fails with EIO: a dying disk, for real
    proc = run_cli("audit", "/proc/self/mem")
    assert proc.returncode == 3
    assert proc.stderr.startswith("imagelint: error: /proc/self/mem: Input/output error (OSError at ")
    assert proc.stderr.count("\n") == 1


def test_imagelint_debug_in_the_environment_adds_the_traceback_too(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    env = {**os.environ, "IMAGELINT_DEBUG": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", BROKEN, "audit", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 3
    assert "Traceback (most recent call last):" in proc.stderr
