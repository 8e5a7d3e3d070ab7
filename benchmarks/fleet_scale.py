"""`imagelint fleet` over a large tagged fleet through the recording front in front of moto
(:mod:`tests.aws.fleet_scale`): a third of the instances not managed by SSM, every 7th SendCommand
throttled, each managed instance answering with a canned bundle of the sample image.

Prints, per fleet size: the SendCommand calls, the largest command's parameters (SSM's quota is
64 KB with the document), the throttles survived, the exit code and the run's wall time.

Run: .venv/bin/python benchmarks/fleet_scale.py [COUNT ...]   (default: 1000 3000)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import yaml
from _timing import REPO

sys.path.insert(0, str(REPO))

from tests.aws.fleet_scale import run_large_fleet
from tests.aws.moto_env import MotoEnv
from tests.support import build_tree


def main(counts: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="imagelint-fleet-bench-") as scratch:
        spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
        tree = build_tree(Path(scratch) / "rootfs", spec["files"])
        for count in counts:
            work = Path(scratch) / str(count)
            work.mkdir()
            with MotoEnv() as env:
                os.environ.update(env.env)
                fleet = run_large_fleet(env, tree, work, count=count, unmanaged_every=3, throttle_every=7)
            print(fleet.figures(), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 3000])
