"""The tree measure's own contract: what a grandchild holds is in the figure (the CLI's work is its
boxed child's), and a command still running at the timeout is killed with its whole session."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.treerss import run_tree, tree_usage

# touches every page of 96 MiB, then prints
HOLD = "x = bytearray(96 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\nprint('held')\n"


def test_the_peak_is_the_grandchilds(tmp_path: Path) -> None:
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    # sh waits for python, as the box's parent waits for its child: only the grandchild holds memory
    run = run_tree(["sh", "-c", f"{sys.executable} {script}; true"], timeout=60)
    assert run.returncode == 0 and run.stdout == "held\n", run
    assert run.peak_mib >= 96, run.peak_mib


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    started = time.monotonic()
    run = run_tree(["sh", "-c", f"sh -c 'sleep 3; touch {marker}'; true"], timeout=1)
    assert run.timed_out and run.returncode is None
    time.sleep(max(0.0, 4 - (time.monotonic() - started)))
    assert not marker.exists()  # the grandchild went with it


def test_a_live_tree_is_summed(tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "hold.py"
    script.write_text(HOLD + "import sys\nsys.stdout.flush()\nsys.stdin.read()\n")
    proc = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} {script}; true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        rss, cpu = tree_usage(proc.pid)
        assert rss >= 96 << 20 and cpu > 0, (rss, cpu)
    finally:
        proc.communicate(b"")
