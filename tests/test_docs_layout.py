"""The "Layout" block of the architecture page (docs/architecture.md) names real paths, and every package
of imagelint/ is in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _layout_paths() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    return [m.group(1) for m in re.finditer(r"^(\S+)\s", block, re.M)]


def test_every_named_path_exists() -> None:
    paths = _layout_paths()
    assert len(paths) > 10
    for path in paths:
        assert (ROOT / path).exists(), path


def test_every_package_is_named() -> None:
    named = {p.rstrip("/") for p in _layout_paths()}
    packages = {
        f"imagelint/{d.name}" for d in (ROOT / "imagelint").iterdir() if (d / "__init__.py").is_file()
    }
    assert packages <= named, packages - named
