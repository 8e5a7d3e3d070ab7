"""Wall time of `imagelint audit` on disk images of the real Debian image (faulty sample planted).

Baseline: `imagelint audit` of the same tree as a directory, in the same run. Images: the raw GPT
disk (EFI + ext4 root) and its qcow2, built by the tests' builders (cached under
~/.cache/imagelint-tests; needs root the first time for the Debian tree).

Goal (issue 13): ratio ≤ 2. Run: .venv/bin/python benchmarks/disk_vs_directory.py [RUNS]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import REPO, median_wall, report, test_rootfs

sys.path.insert(0, str(REPO))

from tests.targets.disk import images


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rootfs = test_rootfs()
    tree = images.sample_tree(rootfs)
    raw = images.cached("gpt-ext4.raw", lambda out: images.gpt(images.ext4_fs(rootfs), out))
    qcow2 = images.cached("gpt-ext4.qcow2", lambda out: images.convert(raw, out, "qcow2"))
    imagelint = str(Path(sys.executable).parent / "imagelint")

    def audit(path: Path) -> float:
        return median_wall([imagelint, "audit", str(path), "-f", "json:/dev/null"], runs, ok_codes=(0, 1))

    baseline = audit(tree)
    print(f"tree: {tree}; median of {runs} runs each")
    report("imagelint audit gpt-ext4.raw", audit(raw), "imagelint audit DIRECTORY", baseline, goal=2.0)
    report("imagelint audit gpt-ext4.qcow2", audit(qcow2), "imagelint audit DIRECTORY", baseline, goal=2.0)


if __name__ == "__main__":
    main()
