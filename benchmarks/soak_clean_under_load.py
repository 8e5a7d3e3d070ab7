"""Repeat the clean-restarter soak test while another process leaks memory cgroups on the same host.

The clean case of ``test_short_soak_flags_a_leaking_restarter_and_not_a_clean_one`` (tests/soak/)
judges a host-wide figure (cgroup v1 counts dying memcgs for the whole machine). This script makes
the machine noisy on purpose: a background ``MemcgLab`` leaks one dying memcg every ``--period``
seconds (what another test, or a crash-looping unit, would do), and the clean test runs ``--runs``
times beside it. It prints how many runs passed; every run must.

    sudo .venv/bin/python benchmarks/soak_clean_under_load.py [--runs 20] [--period 1.5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.soak.memcg import MemcgLab, v1_memory_writable  # noqa: E402

TEST = "tests/soak/test_kernel_leak.py::test_short_soak_flags_a_leaking_restarter_and_not_a_clean_one[clean]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--period", type=float, default=1.5, help="seconds between background leaks")
    args = parser.parse_args()
    ok, reason = v1_memory_writable()
    if not ok:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    noise = MemcgLab("background-noise")
    noise.start(args.period, leak=True)
    passed = 0
    started = time.monotonic()
    try:
        for i in range(args.runs):
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=False,
            )
            passed += proc.returncode == 0
            tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-200:]
            word = "pass" if proc.returncode == 0 else "FAIL"
            print(f"run {i + 1}/{args.runs}: {word} ({tail})", flush=True)
            if proc.returncode != 0:
                print(proc.stdout[-3000:], flush=True)
    finally:
        noise.cleanup()
    print(
        f"{passed}/{args.runs} clean soaks passed beside a background leak of one memcg every "
        f"{args.period:g} s ({noise.leaked} leaked) in {time.monotonic() - started:.0f} s"
    )
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
