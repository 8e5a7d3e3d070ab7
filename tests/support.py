"""Helpers for tests: skip-or-fail on missing facilities, and copying image trees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def need(condition: bool, reason: str) -> None:
    """Skip the calling test when a facility is truly absent, saying which; fail instead on CI."""
    if condition:
        return
    if os.environ.get("IMAGELINT_NO_SKIP") == "1":
        pytest.fail(f"required facility missing on CI: {reason}")
    pytest.skip(reason)


def is_root() -> bool:
    return os.geteuid() == 0


def copy_rootfs(src: Path, dest: Path) -> Path:
    """A private copy of an image tree (hard links are not used: tests may edit files in place)."""
    subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(dest)], check=True)
    return dest
