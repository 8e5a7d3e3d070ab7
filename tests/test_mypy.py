"""The package type-checks: ``mypy`` (strict, as configured in pyproject.toml) reports no error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.support import REPO


def test_mypy_strict_clean() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed in this environment: pip install -e '.[disk,watch]' --group test")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"mypy exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
