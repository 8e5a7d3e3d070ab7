"""Benchmark: peak memory of ``imagelint units`` on 200,000 tiny unit files, against its own start.

A tree is generated in a temporary directory (never in the repository): ``/etc/systemd/system``
holds N small services, every tenth enabled into ``multi-user.target.wants/``, and
``/usr/lib/systemd/system`` a ``multi-user.target`` that ``default.target`` aliases. Each
measurement runs in a fresh child process that first imports imagelint (the CLI application and
the unit index: the baseline RSS), then does the work, then reads its peak RSS (``VmHWM``); the
ratio peak / baseline is taken in that same process, so the interpreter's own size cancels out.

* ``imagelint units ROOT --format json``: the command, run in-process, output to /dev/null;
* ``UnitIndex.build``: the index alone.

    .venv/bin/python benchmarks/units_memory.py [--units 200000] [--root DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, sys

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"no {key} in /proc/self/status")

import imagelint.cli.app
import imagelint.facts.systemd
import imagelint.targets.rootfs
import imagelint.commands.units

mode, root = sys.argv[1], sys.argv[2]
baseline = status("VmRSS")
out = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
if mode == "command":
    sys.argv = ["imagelint", "units", root, "--format", "json"]
    try:
        imagelint.cli.app.run()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
else:
    index = imagelint.facts.systemd.UnitIndex.build(imagelint.targets.rootfs.RootfsTarget(root))
    assert len(index.units) > 0
sys.stdout.flush()
result = {"baseline": baseline, "peak": status("VmHWM"), "from": imagelint.__file__}
os.write(out, json.dumps(result).encode())
"""

UNIT = (
    "[Unit]\nDescription=unit {i}\n\n[Service]\nExecStart=/bin/true\n\n"
    "[Install]\nWantedBy=multi-user.target\n"
)


def generate(root: Path, count: int) -> None:
    """The tree described in the module docstring (``count`` services, one in ten enabled)."""
    etc = root / "etc/systemd/system"
    lib = root / "usr/lib/systemd/system"
    (etc / "multi-user.target.wants").mkdir(parents=True)
    lib.mkdir(parents=True)
    (lib / "multi-user.target").write_text("[Unit]\nDescription=Multi-User System\n")
    (lib / "default.target").symlink_to("multi-user.target")
    for i in range(count):
        name = f"u{i:06d}.service"
        (etc / name).write_text(UNIT.format(i=i))
        if i % 10 == 0:
            (etc / "multi-user.target.wants" / name).symlink_to(f"/etc/systemd/system/{name}")


def measure(mode: str, root: Path) -> tuple[int, int, float, str]:
    """(baseline RSS, peak RSS, seconds, the imagelint imported) of one child process."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(root)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),  # not the checkout: the imagelint imported is the installed one
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{mode} child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    return result["baseline"], result["peak"], elapsed, result["from"]


def mib(n: int) -> str:
    return f"{n / 2**20:8.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--units", type=int, default=200_000, help="unit files to generate (default 200000)")
    parser.add_argument("--root", type=Path, help="use (or create) this tree instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the generated temporary tree")
    args = parser.parse_args()
    scratch: Path | None = None
    if args.root is not None and (args.root / "etc/systemd/system").is_dir():
        root = args.root
        count = sum(1 for _ in os.scandir(root / "etc/systemd/system")) - 1
        print(f"tree: {root} (existing, {count:,} unit files)")
    else:
        if args.root is not None:
            root = args.root
        else:
            scratch = Path(tempfile.mkdtemp(prefix="imagelint-units-memory-"))
            root = scratch / "root"
        started = time.perf_counter()
        generate(root, args.units)
        took = time.perf_counter() - started
        print(f"tree: {root} ({args.units:,} unit files, generated in {took:.0f} s)")
    try:
        print(f"{'':34} {'baseline RSS':>12} {'peak RSS':>12} {'growth':>12}  peak/baseline  time")
        for label, mode in (
            ("imagelint units ROOT --format json", "command"),
            ("UnitIndex.build alone", "index"),
        ):
            baseline, peak, elapsed, where = measure(mode, root)
            print(
                f"{label:34} {mib(baseline)} {mib(peak)} {mib(peak - baseline)}  "
                f"{peak / baseline:9.1f}x   {elapsed:5.1f} s"
            )
        print(f"imagelint imported from {Path(where).parent}")
    finally:
        if scratch is not None and not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        elif scratch is not None:
            print(f"kept {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
