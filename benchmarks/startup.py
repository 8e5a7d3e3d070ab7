"""Start-up cost of `imagelint --version` (the installed console script) and of `python -m imagelint
--version` vs a bare `python3 -c pass` (same interpreter, same venv).

Goal (issue 41): the console script at most 1.3x. Run: .venv/bin/python benchmarks/startup.py [RUNS]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import median_wall, report


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    baseline = median_wall([sys.executable, "-c", "pass"], runs)
    ours = median_wall([str(Path(sys.executable).parent / "imagelint"), "--version"], runs)
    module = median_wall([sys.executable, "-m", "imagelint", "--version"], runs)
    report("imagelint --version", ours, "python3 -c pass", baseline, goal=1.3)
    ratio = module / baseline
    print(f"(for reference) python -m imagelint --version: {module * 1000:.1f} ms, {ratio:.2f}x")


if __name__ == "__main__":
    main()
