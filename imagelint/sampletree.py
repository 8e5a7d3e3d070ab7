"""Build a small image tree from a mapping of image path → entry (the rule packs' ``example`` format).

An entry is file content (a string) or an object with ``content``, ``mode``, ``link`` or
``directory``. Used by the docs' examples, the tests, and ``make demo``'s sample image.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def build_tree(root: Path, entries: Mapping[str, object]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for image_path, entry in entries.items():
        host = root / image_path.lstrip("/")
        host.parent.mkdir(parents=True, exist_ok=True)
        spec: Mapping[str, object] = entry if isinstance(entry, Mapping) else {"content": entry}
        if "link" in spec:
            host.symlink_to(str(spec["link"]))
            continue
        if spec.get("directory"):
            host.mkdir(exist_ok=True)
        else:
            host.write_text(str(spec.get("content", "")), encoding="utf-8")
        if "mode" in spec:
            host.chmod(int(str(spec["mode"]), 8))
    return root
