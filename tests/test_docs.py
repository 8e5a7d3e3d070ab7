"""The generated pages of the docs site (imagelint.docs.PAGES) are what their generators write now, and
`python -m imagelint.docs --check` says when one is not."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from imagelint import docs
from tests.support import REPO


@pytest.mark.parametrize("page", sorted(docs.PAGES))
def test_generated_page_is_current(page: str) -> None:
    written = (REPO / page).read_text(encoding="utf-8")
    assert written == docs.PAGES[page](REPO), f"{page} is stale: run {docs.REGENERATE}"


def _checkout_copy(tmp_path: Path) -> Path:
    """What the generators read, and the pages they write, in a directory of its own."""
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    for page in docs.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / page, tmp_path / page)
    return tmp_path


def _docs(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imagelint.docs", *args], cwd=root, capture_output=True, text=True
    )


def test_check_names_a_stale_page_and_rewriting_fixes_it(tmp_path: Path) -> None:
    root = _checkout_copy(tmp_path)
    assert _docs(root, "--check").returncode == 0
    # an input changes (a new Action input), its page does not
    action = root / "action.yml"
    action.write_text(
        action.read_text(encoding="utf-8").replace(
            "inputs:\n", "inputs:\n  new-input:\n    description: An input nobody documented.\n", 1
        ),
        encoding="utf-8",
    )
    proc = _docs(root, "--check")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"docs/reference/action.md is out of date; run: {docs.REGENERATE}"
    rewrite = _docs(root)
    assert rewrite.returncode == 0, rewrite.stderr
    assert "`new-input`" in (root / "docs/reference/action.md").read_text(encoding="utf-8")
    assert _docs(root, "--check").returncode == 0


def test_a_config_key_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from imagelint import config

    schema = config.config_schema()
    del schema["properties"]["require-journal"]["description"]
    monkeypatch.setattr(config, "config_schema", lambda: schema)
    with pytest.raises(ValueError, match="require-journal has no description"):
        docs.config_reference()
