"""`imagelint units` on a qcow2 against dissect.target's `target-query -f services -s` on the same file.

dissect.target is the forensic peer that reads the same disk images offline (qcow2, raw, vmdk; GPT,
ext4) and lists a Linux image's systemd services. Both tools answer "which units does this image
have" from the qcow2 of the real Debian test image (EFI + ext4 root, the tests' builders, cached
under ~/.cache/imagelint-tests). dissect.target is not one of imagelint's dependencies: it is
installed into its own venv (``--dissect-venv``, default /var/tmp/dissect-venv; made with
``python3 -m venv DIR && DIR/bin/pip install 'dissect.target[full]'`` when missing).

``-s`` gives the records as text, as a person reads them. Wall time, median of RUNS after a
warm-up each; goal (issue 41 item 7): ratio ≤ 0.05.

Run: .venv/bin/python benchmarks/units_vs_dissect.py [--runs 5] [--dissect-venv DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from _timing import REPO, median_wall, report, test_rootfs

sys.path.insert(0, str(REPO))

from tests.targets.disk import images


def dissect_venv(path: Path) -> Path:
    query = path / "bin" / "target-query"
    if not query.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin/pip"), "install", "-q", "dissect.target[full]"], check=True)
    return query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dissect-venv", type=Path, default=Path("/var/tmp/dissect-venv"))
    args = parser.parse_args()
    query = dissect_venv(args.dissect_venv)
    rootfs = test_rootfs()
    raw = images.cached("gpt-ext4.raw", lambda out: images.gpt(images.ext4_fs(rootfs), out))
    qcow2 = images.cached("gpt-ext4.qcow2", lambda out: images.convert(raw, out, "qcow2"))
    imagelint = str(Path(sys.executable).parent / "imagelint")
    listed = subprocess.run(
        [str(query), "-f", "services", "-s", str(qcow2)], capture_output=True, check=False
    )
    ours = subprocess.run([imagelint, "units", str(qcow2)], capture_output=True, check=False)
    records, lines = listed.stdout.count(b"<linux/service"), ours.stdout.count(b"\n")
    print(
        f"load {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs; {qcow2.name}: dissect lists "
        f"{records} service records, imagelint {lines} lines"
    )
    dissect = median_wall([str(query), "-f", "services", "-s", str(qcow2)], args.runs)
    units = median_wall([imagelint, "units", str(qcow2)], args.runs, ok_codes=(0, 1))
    report("imagelint units QCOW2", units, "target-query -f services -s QCOW2", dissect, goal=0.05)


if __name__ == "__main__":
    main()
