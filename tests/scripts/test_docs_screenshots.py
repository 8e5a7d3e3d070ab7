"""The docs pictures (docs/images/) are of the current outputs: ``scripts/docs-screenshots.py --check``
renders the sample image's HTML report and step summary again and compares their digests with those
the pictures were taken of (``docs/images/pictures.json``); ``make docs`` retakes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

SCRIPT = REPO / "scripts" / "docs-screenshots.py"


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def test_the_docs_pictures_are_of_the_current_outputs() -> None:
    proc = _check()
    assert proc.returncode == 0, proc.stderr + proc.stdout
    recorded = json.loads((REPO / "docs" / "images" / "pictures.json").read_text())
    assert set(recorded) == {"html-report.png", "step-summary.png"}
    assert all((REPO / "docs" / "images" / name).stat().st_size > 10_000 for name in recorded)


def test_a_picture_of_an_older_output_is_called_stale(tmp_path: Path) -> None:
    recorded = json.loads((REPO / "docs" / "images" / "pictures.json").read_text())
    recorded["step-summary.png"] = "0" * 64  # as if the summary's Markdown had changed since
    digests = tmp_path / "pictures.json"
    digests.write_text(json.dumps(recorded))
    proc = _check("--digests", str(digests))
    assert proc.returncode == 1
    assert "stale docs pictures: step-summary.png: run make docs" in proc.stderr
