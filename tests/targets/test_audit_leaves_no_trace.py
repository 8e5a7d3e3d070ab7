"""A whole audit of a real image leaves its access times as they were (directories and files)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import copy_rootfs, run_cli

OLD = 1_000_000_000  # 2001: older than every mtime, so relatime would update it on any read


def _atimes(root: Path) -> dict[str, int]:
    times: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            times[path] = st.st_atime_ns
    return times


def test_a_full_audit_changes_no_access_time(debian_rootfs: Path, tmp_path: Path) -> None:
    image = copy_rootfs(debian_rootfs, tmp_path / "img")
    for dirpath, dirnames, filenames in os.walk(image):
        for name in [*dirnames, *filenames]:
            os.utime(os.path.join(dirpath, name), (OLD, OLD), follow_symlinks=False)
    before = _atimes(image)
    proc = run_cli("audit", str(image), "-f", "json:" + str(tmp_path / "r.json"))
    assert proc.returncode in (0, 1), proc.stderr
    after = _atimes(image)
    changed = sorted(p for p in before if after.get(p) != before[p])
    assert changed == [], changed[:20]
