"""`imagelint ami check AMI1 AMI2 …` across regions, ``--parallel N`` at a time, against moto.

Small real disks (mke2fs -d, sfdisk) with a populated machine-id are written to snapshots in two
regions and registered as AMIs. The EBS front makes every GetSnapshotBlock wait until both AMIs'
snapshots are being read at once (``meet``), so a run that checked them one after the other would
never meet (30 s timeouts, ``met`` unset): the overlap is proved, not hoped for. The combined report
must equal the sequential run's but for timings and run ids; an AMI whose snapshot is denied gets
an inconclusive part and the others keep theirs; SIGTERM during two launch-mode soaks terminates
both instances.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import MotoEnv
from tests.support import run_cli
from tests.targets.disk.small_images import ext, partitioned

pytestmark = pytest.mark.slow

EAST, WEST = "us-east-1", "eu-west-1"
FILES = {"/etc/machine-id": "0123456789abcdef0123456789abcdef\n"}  # IL102, high


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MotoEnv, dict[str, str], dict[str, str]]]:
    """(env, {name: "region:ami"}, {name: snapshot}): "east" and "west" in two regions, and "denied",
    whose snapshot the tests deny."""
    work = tmp_path_factory.mktemp("small")
    disk = partitioned(work / "disk.img", "gpt", ext(work / "root.fs", FILES, size="16M"))
    with MotoEnv() as env:
        images, snapshots = {}, {}
        for name, region in (("east", EAST), ("west", WEST), ("denied", EAST)):
            snapshot, _ = upload_image(env.client("ebs", direct=True, region=region), disk, description=name)
            ec2 = env.client("ec2", region=region)
            images[name] = f"{region}:{register_image(ec2, snapshot, name=f'imagelint-{name}')}"
            snapshots[name] = snapshot
        yield env, images, snapshots


@pytest.fixture
def env(aws: tuple[MotoEnv, dict[str, str], dict[str, str]]) -> Iterator[MotoEnv]:
    aws[0].ebs.reset()
    yield aws[0]
    aws[0].ebs.reset()


def _run(env: MotoEnv, out: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    proc = run_cli("ami", *args, "--mode", "snapshot", "-f", f"json:{out}", env=env.env, timeout=600)
    return proc.returncode, proc.stderr, json.loads(out.read_text()) if out.exists() else {}


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs from run to run: times, run ids, I/O counters."""
    report = json.loads(json.dumps(report))
    for key in ("started_at", "duration_s"):
        report.pop(key, None)
    for rule in report["rules"]:
        rule.pop("duration_ms", None)
    for part in report["facts"].values():
        part.get("target", {}).pop("run_id", None)
        part.pop("disk", None), part.pop("snapshot", None)
    return report


def test_two_amis_in_two_regions_overlap_and_report_as_one_sequential_run(
    env: MotoEnv, aws: tuple[MotoEnv, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    _, images, snapshots = aws
    env.ebs.meet = 2
    code, err, parallel = _run(
        env, tmp_path / "parallel.json", images["west"], images["east"], "--parallel", "2"
    )
    assert code == 1, err
    assert env.ebs.met.is_set() and env.ebs.max_snapshots_in_flight == 2  # both read at once
    assert {s for s, _ in env.ebs.snapshot_gets} == {snapshots["west"], snapshots["east"]}
    assert f"{images['west']}: listing blocks" in err and f"{images['east']}: reading snapshot" in err

    env.ebs.reset()
    code, err, sequential = _run(
        env, tmp_path / "sequential.json", images["west"], images["east"], "--parallel", "1"
    )
    assert code == 1, err
    assert env.ebs.max_snapshots_in_flight == 1  # one after the other
    assert _stable(parallel) == _stable(sequential)
    assert parallel["target"]["path"] == f"{images['west']},{images['east']}"  # the order given
    assert list(parallel["facts"]) == [images["west"], images["east"]]
    assert {f["rule_id"] for f in parallel["findings"]} >= {"IL102"}
    assert len([f for f in parallel["findings"] if f["rule_id"] == "IL102"]) == 2  # one per AMI


@pytest.mark.parametrize(
    ("fail_on", "code", "verdict"), [("high", 1, "fail"), ("critical", 3, "inconclusive")]
)
def test_an_ami_that_cannot_be_read_keeps_the_others_results(
    env: MotoEnv,
    aws: tuple[MotoEnv, dict[str, str], dict[str, str]],
    tmp_path: Path,
    fail_on: str,
    code: int,
    verdict: str,
) -> None:
    """The denied AMI's part is inconclusive with its error; the verdict is decide()'s on the whole:
    the others' high finding fails it at --fail-on high, and at critical the missing part makes it
    inconclusive."""
    _, images, snapshots = aws
    env.ebs.denied = {snapshots["denied"]}
    args = (images["east"], images["denied"], images["west"], "--fail-on", fail_on)
    got, err, report = _run(env, tmp_path / "report.json", *args)
    assert got == code, err
    assert report["verdict"] == verdict
    parts = report["facts"]
    assert list(parts) == [images["east"], images["denied"], images["west"]]
    assert [parts[i]["verdict"] for i in parts] == [
        "fail" if fail_on == "high" else "pass",
        "inconclusive",
        "fail" if fail_on == "high" else "pass",
    ]
    assert len([f for f in report["findings"] if f["rule_id"] == "IL102"]) == 2
    denied = [e for e in report["errors"] if e["where"].startswith(images["denied"])]
    assert len(denied) == 1 and "ListSnapshotBlocks failed: AccessDeniedException" in denied[0]["message"]
    assert f"{images['denied']}: error (the other images go on):" in err
    assert "Traceback" not in err


def test_parallel_out_of_range_is_usage(
    env: MotoEnv, aws: tuple[MotoEnv, dict[str, str], dict[str, str]]
) -> None:
    proc = run_cli("ami", aws[1]["east"], "--mode", "snapshot", "--parallel", "0", env=env.env)
    assert proc.returncode == 2 and "--parallel" in proc.stderr


def test_sigterm_during_two_soaks_terminates_both_instances(moto_env: MotoEnv, sample_image: Path) -> None:
    """Launch mode, two AMIs at once: the signal reaches both workers, each cancels its command and
    terminates its instance, and the run ends inconclusive."""
    moto_env.agent.rootfs = sample_image
    ec2 = moto_env.client("ec2")
    root = ec2.describe_images(ImageIds=[moto_env.image_id])["Images"][0]["BlockDeviceMappings"][0]
    second = register_image(ec2, root["Ebs"]["SnapshotId"], name="imagelint-second")
    code, err = moto_env.sigterm_while_soaking(
        "ami", moto_env.image_id, second, "--report-bucket", moto_env.bucket, "--poll", "0.2s",
        "--instance-profile", moto_env.profile,
        "--soak", "60s", "--soak-interval", "1s", "--parallel", "2", soaking=2,
    )  # fmt: skip
    assert code == 3, err
    assert "interrupted by SIGTERM" in err
    assert len(moto_env.launched()) == 2
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}  # each run's group too
    assert "Traceback" not in err


def test_the_credentials_must_last_the_waves_not_every_image_in_turn() -> None:
    """Eight AMIs four at a time take two images' time (and the cleanup), not eight."""
    from imagelint.commands.ami import AmiOptions

    one = AmiOptions().per_image_seconds()
    assert AmiOptions(parallel=4).run_seconds(8) == 2 * one + 600
    assert AmiOptions(parallel=4).run_seconds(3) == one + 600
    assert AmiOptions(parallel=1).run_seconds(3) == 3 * one + 600
    assert AmiOptions(parallel=4).run_seconds(9) == 3 * one + 600
