"""Wall time of `imagelint audit` (all built-in packs) on the real Debian image.

Baseline: `systemctl --root=ROOT list-unit-files` on the same image, in the same run.

Goal (issue 2): ratio ≤ 2. Run: .venv/bin/python benchmarks/audit_vs_systemctl.py [RUNS]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from _timing import median_wall, report, test_rootfs


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    root = test_rootfs()
    imagelint = str(Path(sys.executable).parent / "imagelint")
    systemctl = shutil.which("systemctl") or "systemctl"
    baseline = median_wall([systemctl, f"--root={root}", "list-unit-files", "--no-pager"], runs)
    ours = median_wall([imagelint, "audit", str(root), "-f", "json:/dev/null"], runs, ok_codes=(0, 1))
    print(f"image: {root}; median of {runs} runs each")
    report("imagelint audit", ours, "systemctl --root list-unit-files", baseline, goal=2.0)


if __name__ == "__main__":
    main()
