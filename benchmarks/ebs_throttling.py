"""EBS direct reads under an account quota: a fixed 16 calls in flight against the adaptive window.

A 1 GiB snapshot with 96 blocks of random data is read in full through the real SnapshotStream, in
reads of 16 blocks (the stream asks for all of a read's blocks at once), with 50 ms added to every
GetSnapshotBlock by the moto front, which also throttles (``RequestThrottledException``) every call
that arrives while ``--quota`` calls are being served: an account quota of 4 calls in flight is
4 / 50 ms = 80 blocks a second. Three readers, each run ``--runs`` times (median):

- **fixed 16**: the window never lowered (what the reader did before: every throttled call backs
  off and comes back, the 16 stay in flight);
- **adaptive 16**: :class:`imagelint.aws.call_window.CallWindow` (halved once per throttled round,
  one more call per window of answers);
- **fixed 4**: the floor, a reader told the quota in advance.

Printed: wall time, throttled answers, GetSnapshotBlock requests, the lowest window, and the ratios
of the adaptive reader against fixed 16 (time, throttled answers). Every read is checked against the
image's bytes. A reader whose retries run out is reported as failed (that is the fixed reader's
failure mode under a tight quota).

Run: .venv/bin/python benchmarks/ebs_throttling.py [--runs 3] [--quota 4]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import REPO

sys.path.insert(0, str(REPO))

from imagelint.aws.call_window import CallWindow
from imagelint.aws.clients import Clients
from imagelint.aws.ebs_api import BLOCK_SIZE, EbsApi
from imagelint.aws.ebs_blocks import SnapshotStream
from imagelint.errors import ImageLintError
from tests.aws.ebs_upload import upload_image
from tests.aws.moto_env import REGION, MotoEnv

BLOCKS = 96
LATENCY = 0.05
READ = 16  # blocks a read asks for at once


class FixedWindow(CallWindow):
    """The reader before the window: throttled answers never lower it."""

    def throttled(self, started: int) -> None:
        return None


def sparse_image(path: Path) -> bytes:
    rng = random.Random(5)
    data = bytearray(1024**3)
    for index in range(BLOCKS):
        data[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE] = rng.randbytes(BLOCK_SIZE)
    path.write_bytes(data)
    return bytes(data[: BLOCKS * BLOCK_SIZE])


def read_all(env: MotoEnv, snapshot_id: str, window: CallWindow, expected: bytes) -> dict[str, Any]:
    env.ebs.reset()
    env.ebs.latency, env.ebs.quota = LATENCY, QUOTA
    api = EbsApi(Clients(REGION).ebs(16), snapshot_id, window=window)
    started = time.perf_counter()
    failed = ""
    with SnapshotStream(api, concurrency=16, readahead=0) as stream:
        try:
            for first in range(0, BLOCKS, READ):
                stream.seek(first * BLOCK_SIZE)
                got = stream.read(READ * BLOCK_SIZE)
                if got != expected[first * BLOCK_SIZE : (first + READ) * BLOCK_SIZE]:
                    raise SystemExit(f"blocks {first}..{first + READ}: wrong bytes")
        except OSError:
            failure: ImageLintError | None = stream.failure
            failed = str(failure or "read failed")
        stats = stream.stats()
    return {
        "seconds": time.perf_counter() - started,
        "throttled": env.ebs.over_quota,
        "requests": stats["get_requests"],
        "lowest": window.lowest,
        "failed": failed,
    }


def main() -> None:
    global QUOTA
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quota", type=int, default=4)
    args = parser.parse_args()
    QUOTA = args.quota
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp, MotoEnv() as env:
        image = Path(tmp) / "sparse.img"
        expected = sparse_image(image)
        os.environ.update(env.env)
        snapshot_id, written = upload_image(env.client("ebs", direct=True), image)
        print(f"snapshot: {written} blocks of data, {LATENCY * 1000:.0f} ms a block, quota {QUOTA} in flight")
        readers = {
            "fixed 16": lambda: FixedWindow(16),
            "adaptive 16": lambda: CallWindow(16),
            f"fixed {QUOTA}": lambda: FixedWindow(QUOTA),
        }
        medians: dict[str, dict[str, float]] = {}
        for name, window in readers.items():
            results = [read_all(env, snapshot_id, window(), expected) for _ in range(args.runs)]
            failures = [r["failed"] for r in results if r["failed"]]
            medians[name] = {
                k: statistics.median(r[k] for r in results)
                for k in ("seconds", "throttled", "requests", "lowest")
            }
            m = medians[name]
            print(
                f"{name:>12}: {m['seconds']:6.2f} s  {m['throttled']:6.0f} throttled  "
                f"{m['requests']:6.0f} requests  lowest window {m['lowest']:.0f}  "
                f"failed {len(failures)}/{args.runs}" + (f" ({failures[0][:120]})" if failures else "")
            )
        fixed, adaptive = medians["fixed 16"], medians["adaptive 16"]
        print(
            f"adaptive / fixed 16: time {adaptive['seconds'] / fixed['seconds']:.2f}x, "
            f"throttled answers {adaptive['throttled'] / max(1, fixed['throttled']):.2f}x"
        )


QUOTA = 4

if __name__ == "__main__":
    main()
