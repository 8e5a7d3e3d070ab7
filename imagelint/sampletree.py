"""Build a small image tree from a mapping of image path → entry (the rule packs' ``example`` format).

An entry is file content (a string) or an object with ``content``, ``mode``, ``link`` or
``directory``. Used by the docs' examples, the tests, and ``make demo``'s sample image.
:func:`build_image` builds a whole image of them: with the marks of an operating system's root
(:mod:`imagelint.targets.osroot`) that the commands ask of what they audit.
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


# The marks of an OS root (imagelint/targets/osroot.py) a crafted image needs to be audited as one.
OS_ROOT_MARKS: dict[str, object] = {
    "/etc/os-release": "ID=debian\n",
    "/usr/bin": {"directory": True},
    "/usr/lib/systemd/systemd": "",
}


def build_image(root: Path, entries: Mapping[str, object]) -> Path:
    """:func:`build_tree` of an image: ``entries`` over the marks of an OS root (an entry of the same
    path replaces a mark's)."""
    return build_tree(root, {**OS_ROOT_MARKS, **entries})
