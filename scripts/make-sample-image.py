"""Build the bundled sample image (a small tree with the faults imagelint exists to catch).

Usage: python scripts/make-sample-image.py examples/sample-image.yaml DEST
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from imagelint.sampletree import build_image


def main() -> None:
    spec, dest = Path(sys.argv[1]), Path(sys.argv[2])
    entries = yaml.safe_load(spec.read_text(encoding="utf-8"))["files"]
    build_image(dest, entries)  # the entries, over the marks of an OS root
    print(f"sample image: {dest} ({len(entries)} entries)")


if __name__ == "__main__":
    main()
