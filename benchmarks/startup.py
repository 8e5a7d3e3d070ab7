"""Start-up cost of `imagelint --version` vs a bare `python3 -c pass` (same interpreter).

Goal (issue 2): ratio ≤ 1.5. Run: .venv/bin/python benchmarks/startup.py [RUNS]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import median_wall, report


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    baseline = median_wall([sys.executable, "-c", "pass"], runs)
    ours = median_wall([str(Path(sys.executable).parent / "imagelint"), "--version"], runs)
    report("imagelint --version", ours, "python3 -c pass", baseline, goal=1.5)


if __name__ == "__main__":
    main()
