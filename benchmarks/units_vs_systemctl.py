"""Benchmark: building the unit index of the Debian test image vs ``systemctl list-unit-files``.

Both sides are timed as whole processes, interpreter start included, alternating, N times in the
same run:

* imagelint: the command itself, ``imagelint units ROOT --format json`` (CLI start-up included);
  and, to show where the time goes, ``python -c`` building ``UnitIndex`` and dumping it as JSON;
* systemd:   ``systemctl --root=ROOT list-unit-files --no-legend --no-pager``.

It builds nothing: it uses the cached debootstrapped image that the test suite builds
(``$IMAGELINT_TEST_CACHE`` or ``$XDG_CACHE_HOME/imagelint-tests`` or ``~/.cache/imagelint-tests``,
then ``bookworm/``), or a root given as the first argument.

    .venv/bin/python benchmarks/units_vs_systemctl.py [ROOT] [-n 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = (
    "import json, sys\n"
    "from imagelint.targets.rootfs import RootfsTarget\n"
    "from imagelint.facts.systemd import UnitIndex\n"
    "index = UnitIndex.build(RootfsTarget(sys.argv[1]))\n"
    "sys.stdout.write(json.dumps(index.to_dict()))\n"
)


def default_root() -> Path:
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg / "imagelint-tests"))
    return cache / "bookworm"


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=default_root())
    parser.add_argument("-n", type=int, default=21, help="runs of each command (default 21)")
    args = parser.parse_args()
    root: Path = args.root
    if not (root / "usr/lib/systemd/system").is_dir():
        print(f"no image at {root}: run the test suite once to build it", file=sys.stderr)
        return 2
    ours = [str(Path(sys.executable).parent / "imagelint"), "units", str(root), "--format", "json"]
    index_only = [sys.executable, "-c", CHILD, str(root)]
    theirs = ["systemctl", f"--root={root}", "list-unit-files", "--no-legend", "--no-pager"]
    for cmd in (ours, index_only, theirs):  # warm the page cache and the bytecode cache
        timed(cmd)
    ours_t: list[float] = []
    index_t: list[float] = []
    theirs_t: list[float] = []
    for _ in range(args.n):
        ours_t.append(timed(ours))
        index_t.append(timed(index_only))
        theirs_t.append(timed(theirs))
    m_ours, m_theirs = statistics.median(ours_t), statistics.median(theirs_t)
    print(f"image: {root}  runs: {args.n} each, alternating")
    for label, runs in (
        ("imagelint units ROOT --format json", ours_t),
        ("UnitIndex.build + JSON alone", index_t),
        ("systemctl list-unit-files", theirs_t),
    ):
        median, fastest = statistics.median(runs) * 1000, min(runs) * 1000
        print(f"{label:34} (process): median {median:7.1f} ms  min {fastest:7.1f} ms")
    print(f"ratio imagelint units / systemctl (medians): {m_ours / m_theirs:.2f}  (goal <= 1.0)")
    print(f"ratio index alone / systemctl (medians): {statistics.median(index_t) / m_theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
