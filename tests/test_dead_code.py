"""No dead code in the package: vulture finds no unused function, class, method, attribute or variable
in imagelint/, counting the tests, benchmarks and scripts as users (``[tool.vulture]`` in pyproject.toml
lists the true false positives, each with what uses it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPO


def _vulture(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *args], cwd=REPO, capture_output=True, text=True, check=False
    )


def test_vulture_finds_no_dead_code_in_the_package() -> None:
    proc = _vulture()  # paths and the known false positives: pyproject.toml
    assert proc.stderr == "", proc.stderr
    dead = [line for line in proc.stdout.splitlines() if line.startswith("imagelint/")]
    assert dead == [], "\n".join(dead)


def test_vulture_sees_a_function_nothing_calls(tmp_path: Path) -> None:
    module = tmp_path / "imagelint_probe.py"
    module.write_text("def used() -> int:\n    return 1\n\n\ndef forgotten() -> int:\n    return used()\n")
    (tmp_path / "empty.toml").write_text("")  # none of the project's settings
    proc = _vulture(str(module), "--config", str(tmp_path / "empty.toml"))
    assert "unused function 'forgotten'" in proc.stdout, proc.stdout + proc.stderr
