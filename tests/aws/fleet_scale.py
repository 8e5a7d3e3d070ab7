"""A large fleet through the recording front in front of moto: for ``tests/aws/test_fleet_scale.py``
and ``benchmarks/fleet_scale.py``.

:func:`run_large_fleet` launches ``count`` tagged instances in moto, leaves every ``unmanaged_every``-th
one without an SSM agent, lets ``faults`` inject what it wants for some of them, has the stand-in agent
answer each command with one canned bundle (the real collector's bundle of a tree, PUT to the command's
own presigned URL), throttles every ``throttle_every``-th SendCommand, and runs ``imagelint fleet`` in
this process. What the front recorded and the report come back in :class:`LargeFleet`. The runner's
scratch space (each bundle extracted, then removed) is on tmpfs when there is one: on a busy ext4
mounted with ``discard``, the ``rmdir`` of a thousand extracted trees alone took 40 s."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.aws.moto_env import MotoEnv, SentCommand
from tests.collector.support import collect

TAG = "Role"


@dataclass
class LargeFleet:
    tagged: list[str]
    unmanaged: set[str]
    sent: list[SentCommand]  # every SendCommand the front let through
    throttled: int  # SendCommand requests the front answered with ThrottlingException
    report: dict[str, Any]
    exit_code: int
    seconds: float  # the fleet run alone (not the launch of the instances)

    @property
    def managed(self) -> list[str]:
        return [i for i in self.tagged if i not in self.unmanaged]

    def figures(self) -> str:
        largest = max(c.parameters_bytes for c in self.sent)
        return (
            f"{len(self.tagged)} tagged, {len(self.unmanaged)} not managed: {len(self.sent)} SendCommand "
            f"calls (largest parameters {largest:,} bytes), {self.throttled} throttled and retried, "
            f"exit {self.exit_code}, {self.seconds:.1f}s"
        )


def launch(env: MotoEnv, value: str, count: int) -> list[str]:
    """``count`` running instances tagged ``Role=value``, in batches moto launches quickly."""
    ids: list[str] = []
    tags = [{"ResourceType": "instance", "Tags": [{"Key": TAG, "Value": value}]}]
    ec2 = env.client("ec2", direct=True)
    while len(ids) < count:
        n = min(250, count - len(ids))
        reply = ec2.run_instances(ImageId=env.image_id, MinCount=n, MaxCount=n, TagSpecifications=tags)
        ids += [i["InstanceId"] for i in reply["Instances"]]
    return sorted(ids)


def run_large_fleet(
    env: MotoEnv,
    tree: Path,
    work: Path,
    *,
    count: int,
    unmanaged_every: int,
    throttle_every: int,
    max_concurrency: str = "100",
    max_errors: str = "0",
    offline_grace: float = 300.0,
    faults: Callable[[list[str]], None] = lambda tagged: None,
) -> LargeFleet:
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    tagged = launch(env, "large", count)
    unmanaged = set(tagged[::unmanaged_every])
    env.agent.unmanaged = unmanaged
    env.agent.canned = collect(tree, work / "collect").read_bytes()
    env.throttle_every = throttle_every
    faults(tagged)
    out = work / "fleet.json"
    options = FleetOptions(
        target=f"tag:{TAG}=large",
        report_bucket=env.bucket,
        max_concurrency=max_concurrency,
        max_errors=max_errors,
        poll=0.2,
        send_backoff=0.05,
        offline_grace=offline_grace,
        run=RunOptions(outputs=[OutputSpec("json", out)], select=["IL101"]),
    )
    with scratch_in_memory():
        started = time.monotonic()
        verdict = run_fleet(options)
        seconds = time.monotonic() - started
    report = json.loads(out.read_text(encoding="utf-8"))
    code = int(verdict.exit_code)
    return LargeFleet(tagged, unmanaged, list(env.sent), env.throttled, report, code, seconds)


@contextlib.contextmanager
def scratch_in_memory() -> Iterator[None]:
    """Temporary files and directories go to /dev/shm (tmpfs) for the duration, if it exists."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield
        return
    saved = tempfile.tempdir
    with tempfile.TemporaryDirectory(dir=shm, prefix="imagelint-fleet-scale-") as fast:
        tempfile.tempdir = fast
        try:
            yield
        finally:
            tempfile.tempdir = saved
