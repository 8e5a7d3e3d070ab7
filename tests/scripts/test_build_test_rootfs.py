"""The shared test-image cache is built under a lock and never pulled from under another run."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.support import REPO, is_root, need


def test_a_builder_that_waited_for_the_lock_uses_the_tree_another_run_finished(tmp_path: Path) -> None:
    need(is_root(), "the build script refuses to start without root (debootstrap needs it)")
    need(shutil.which("debootstrap") is not None, "debootstrap is not installed")
    dest = tmp_path / "bookworm"
    with open(tmp_path / "bookworm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run is building
        proc = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "build-test-rootfs.sh"), str(dest)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 1  # long enough to reach flock, or to fail fast
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, "the second builder did not wait for the lock"
        # the other run finishes: its tree is renamed into place, complete, and a reader uses it
        staging = tmp_path / "bookworm.partial.other"
        staging.mkdir()
        (staging / "in-use").write_text("a test is reading this tree")
        (staging / ".imagelint-rootfs-complete").touch()
        os.rename(staging, dest)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == str(dest)
    assert (dest / "in-use").read_text() == "a test is reading this tree"  # not removed, not rebuilt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bookworm", "bookworm.lock"]
