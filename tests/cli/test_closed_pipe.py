"""A reader that closes stdout early (``imagelint rules list | head -1``) costs nothing: no message, and
the command's own exit code (a listing's 0, an audit's verdict), not click's exit 1 for a broken pipe."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.formats.ci_helpers import sample_image


def _closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write is EPIPE
    try:
        return subprocess.run(
            [exe, *args], stdout=write_end, stderr=subprocess.PIPE, timeout=120, check=False
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["rules", "list"], ["schema", "report"], ["--help"], ["audit", "--help"]])
def test_a_listing_into_a_closed_pipe_exits_0_quietly(args: list[str]) -> None:
    proc = _closed_pipe(*args)
    assert (proc.returncode, proc.stderr) == (0, b"")


def test_an_audit_into_a_closed_pipe_keeps_its_verdict(tmp_path: Path, clean_rootfs: Path) -> None:
    assert _closed_pipe("audit", str(sample_image(tmp_path / "faulty"))).returncode == 1
    passed = _closed_pipe("audit", str(clean_rootfs))
    assert (passed.returncode, passed.stderr) == (0, b"")
