"""Volume mode (AWS side against moto, the mount behind a test host), the Packer manifest, fleet, cleanup."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.aws.manifest import amis_from_manifest
from imagelint.errors import UsageError
from tests.aws.moto_env import MotoEnv
from tests.support import run_cli, wait_for


class LocalTreeHost:
    """Stands in for the EC2 runner: its identity is a moto instance, 'mounting' yields a local tree.

    The real device lookup and read-only mount (imagelint.aws.volume.Ec2VolumeHost) need an EBS
    device and cannot run here."""

    def __init__(self, instance_id: str, zone: str, tree: Path) -> None:
        self.instance_id, self.zone, self.tree = instance_id, zone, tree
        self.seen_devices: list[Path] = []

    def identity(self) -> tuple[str, str]:
        return self.instance_id, self.zone

    def find_device(self, volume_id: str, timeout: float, device: str = "/dev/sdf") -> Path:
        self.attached_at = device
        return Path(f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{volume_id.replace('-', '')}")

    @contextlib.contextmanager
    def mounted(self, device: Path) -> Iterator[Path]:
        self.seen_devices.append(device)
        yield self.tree


def test_volume_mode_creates_attaches_and_deletes_the_volume(
    moto_env: MotoEnv, sample_image: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    ec2 = moto_env.client("ec2")
    runner = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    host = LocalTreeHost(runner["InstanceId"], runner["Placement"]["AvailabilityZone"], sample_image)
    out = tmp_path / "r.json"
    options = AmiOptions(
        images=[moto_env.image_id],
        mode="volume",
        tag=True,
        timing=Timing(poll=0.2),
        run=RunOptions(outputs=[OutputSpec("json", out)]),
    )
    verdict = run_ami(options, volume_host=host)
    assert verdict.value == "fail"
    report = json.loads(out.read_text())
    volume = report["facts"]["volume"]
    assert volume["zone"] == host.zone and volume["snapshot_id"].startswith("snap-")
    assert host.seen_devices == [
        Path(f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{volume['volume_id'].replace('-', '')}")
    ]
    assert moto_env.alive()["volumes"] == []
    assert (
        ec2.describe_volumes(Filters=[{"Name": "volume-id", "Values": [volume["volume_id"]]}])["Volumes"]
        == []
    )


def _manifest(path: Path, builds: list[tuple[str, str]], last: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "builds": [
                    {"name": "b", "builder_type": "amazon-ebs", "artifact_id": art, "packer_run_uuid": run}
                    for run, art in builds
                ],
                "last_run_uuid": last,
            }
        )
    )
    return path


def test_manifest_picks_packer_run_uuid_then_last_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = _manifest(
        tmp_path / "m.json",
        [("old", "us-east-1:ami-11111111"), ("new", "eu-west-1:ami-22222222,us-east-1:ami-33333333")],
        "new",
    )
    monkeypatch.delenv("PACKER_RUN_UUID", raising=False)
    monkeypatch.delenv("PACKER_BUILD_NAME", raising=False)
    assert amis_from_manifest(m) == [("eu-west-1", "ami-22222222"), ("us-east-1", "ami-33333333")]
    monkeypatch.setenv("PACKER_RUN_UUID", "old")
    assert amis_from_manifest(m) == [("us-east-1", "ami-11111111")]
    monkeypatch.setenv("PACKER_RUN_UUID", "gone")
    with pytest.raises(UsageError, match="no build of run gone"):
        amis_from_manifest(m)
    bad = _manifest(tmp_path / "bad.json", [("x", "/tmp/output.img")], "x")
    monkeypatch.delenv("PACKER_RUN_UUID")
    with pytest.raises(UsageError, match="not region:ami-id"):
        amis_from_manifest(bad)


def test_manifest_picks_the_build_of_packer_build_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sources in one template: one run UUID, two builds; each gate checks its own build's AMI."""
    data = {
        "builds": [
            {"name": "debian", "packer_run_uuid": "r", "artifact_id": "us-east-1:ami-aaaaaaaa"},
            {"name": "ubuntu", "packer_run_uuid": "r", "artifact_id": "us-east-1:ami-bbbbbbbb"},
        ],
        "last_run_uuid": "r",
    }
    m = tmp_path / "m.json"
    m.write_text(json.dumps(data))
    monkeypatch.setenv("PACKER_RUN_UUID", "r")
    monkeypatch.setenv("PACKER_BUILD_NAME", "ubuntu")
    assert amis_from_manifest(m) == [("us-east-1", "ami-bbbbbbbb")]
    assert amis_from_manifest(m, build_name="debian") == [("us-east-1", "ami-aaaaaaaa")]
    monkeypatch.setenv("PACKER_BUILD_NAME", "rhel")
    with pytest.raises(UsageError, match="no build named 'rhel'"):
        amis_from_manifest(m)
    monkeypatch.delenv("PACKER_BUILD_NAME")
    assert len(amis_from_manifest(m)) == 2  # outside Packer: the whole run


def test_packer_manifest_end_to_end(moto_env: MotoEnv, sample_image: Path, tmp_path: Path) -> None:
    moto_env.agent.rootfs = sample_image
    m = _manifest(tmp_path / "m.json", [("r1", f"us-east-1:{moto_env.image_id}")], "r1")
    proc = run_cli(
        "ami",
        "--packer-manifest",
        str(m),
        "--report-bucket",
        moto_env.bucket,
        "--instance-profile",
        moto_env.profile,
        "--tag",
        "--poll",
        "0.2s",
        "--soak",
        "0",
        env={**moto_env.env, "PACKER_RUN_UUID": "r1"},
    )
    assert proc.returncode == 1, proc.stderr
    tags = moto_env.client("ec2").describe_tags(
        Filters=[{"Name": "resource-id", "Values": [moto_env.image_id]}]
    )
    assert {t["Key"]: t["Value"] for t in tags["Tags"]}["imagelint:verdict"] == "fail"


def test_fleet_one_row_per_tagged_instance(moto_env: MotoEnv, sample_image: Path, tmp_path: Path) -> None:
    moto_env.agent.rootfs = sample_image
    ec2 = moto_env.client("ec2")

    def launch(role: str) -> str:
        tags = [{"ResourceType": "instance", "Tags": [{"Key": "Role", "Value": role}]}]
        return ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1, TagSpecifications=tags)[
            "Instances"
        ][0]["InstanceId"]

    gpu = sorted([launch("gpu"), launch("gpu")])
    other = launch("web")
    out = tmp_path / "fleet.json"
    proc = run_cli(
        "fleet",
        "--target",
        "tag:Role=gpu",
        "--report-bucket",
        moto_env.bucket,
        "--poll",
        "0.2s",
        "-f",
        f"json:{out}",
        env=moto_env.env,
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    assert report["target"]["kind"] == "fleet"
    assert [r["instance_id"] for r in report["facts"]["instances"]] == gpu
    assert all(r["verdict"] == "fail" for r in report["facts"]["instances"])
    assert {f["evidence"]["instance_id"] for f in report["findings"]} == set(gpu)
    assert other not in json.dumps(report)


def _tagged(kind: str, **tags: str) -> list[dict]:
    return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


PAST = {"imagelint:run": "old-run", "imagelint:deadline": "2000-01-01T00:00:00Z"}


def test_cleanup_removes_only_runs_past_their_deadline(moto_env: MotoEnv) -> None:
    """Ownership before deletion: the run tag and a deadline in the past. A run in progress (its
    deadline ahead: a long soak) stays even with --older-than 0s; a look-alike carrying only the run
    tag (an earlier version's, or a user's) stays; --run names a dead run to remove before its
    deadline."""
    ec2 = moto_env.client("ec2")

    def launch(specs: list[dict] | None = None) -> str:
        extra = {"TagSpecifications": specs} if specs else {}
        reply = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1, **extra)
        return str(reply["Instances"][0]["InstanceId"])

    orphan = launch(_tagged("instance", **PAST))
    bystander = launch()
    look_alike = launch(_tagged("instance", **{"imagelint:run": "old-run"}))
    soaking = launch(
        _tagged("instance", **{"imagelint:run": "soak", "imagelint:deadline": "2999-01-01T00:00:00Z"})
    )
    vol = ec2.create_volume(
        AvailabilityZone="us-east-1a", Size=1, TagSpecifications=_tagged("volume", **PAST)
    )
    dry = run_cli("ami", "cleanup", "--older-than", "0s", "--dry-run", "--poll", "0.2s", env=moto_env.env)
    assert dry.returncode == 0 and f"would terminate {orphan}" in dry.stdout
    assert sorted(moto_env.alive()["instances"]) == sorted([orphan, look_alike, soaking])
    proc = run_cli("ami", "cleanup", "--older-than", "0s", "--poll", "0.2s", env=moto_env.env)
    assert proc.returncode == 0, proc.stderr
    assert f"terminated {orphan} (run old-run)" in proc.stdout and f"deleted {vol['VolumeId']}" in proc.stdout
    assert sorted(moto_env.alive()["instances"]) == sorted([look_alike, soaking])
    assert moto_env.alive()["volumes"] == [] and look_alike not in proc.stdout and soaking not in proc.stdout
    state = ec2.describe_instances(InstanceIds=[bystander])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] == "running"
    named = run_cli("ami", "cleanup", "--run", "soak", "--poll", "0.2s", env=moto_env.env)
    assert named.returncode == 0 and f"terminated {soaking} (run soak)" in named.stdout, named.stderr
    assert moto_env.alive()["instances"] == [look_alike]


def test_tag_values_are_checked_against_ec2_limits() -> None:
    from imagelint.aws.ec2 import validate_tags

    validate_tags({"imagelint:verdict": "pass", "imagelint:checked-at": "2026-12-02T12:00:00Z"})
    with pytest.raises(UsageError, match="256"):
        validate_tags({"imagelint:x": "a" * 257})
    with pytest.raises(UsageError, match="1 to 128"):
        validate_tags({"k" * 129: "v"})
    with pytest.raises(UsageError, match="aws: prefix"):
        validate_tags({"aws:x": "v"})
    with pytest.raises(UsageError, match="characters EC2"):
        validate_tags({"imagelint:x": "a;b"})


def _fleet_instances(env: MotoEnv, role: str, count: int) -> list[str]:
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "Role", "Value": role}]}]
    reply = env.client("ec2").run_instances(
        ImageId=env.image_id, MinCount=count, MaxCount=count, TagSpecifications=tags
    )
    return sorted(i["InstanceId"] for i in reply["Instances"])


def test_fleet_failed_command_is_an_inconclusive_row(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    """One instance's command fails (SSM status Failed, exit 90): its row is inconclusive with the reason,
    the other instance's findings are all there, and the exit code is 1 (a fail is never hidden by an
    unreadable part; with no failing instance it would be 3, see the timeout test)."""
    moto_env.agent.rootfs = sample_image
    bad, good = _fleet_instances(moto_env, "gpu", 2)
    moto_env.agent.faults[bad] = "command-fails"
    out = tmp_path / "fleet.json"
    proc = run_cli(
        "fleet", "--target", "tag:Role=gpu", "--report-bucket", moto_env.bucket, "--max-errors", "1",
        "--poll", "0.2s", "-f", f"json:{out}", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    rows = {r["instance_id"]: r for r in report["facts"]["instances"]}
    assert rows[bad]["verdict"] == "inconclusive" and rows[bad]["status"] == "Failed"
    assert rows[bad]["findings"] == 0 and rows[bad]["errors"] == 1
    assert rows[good]["verdict"] == "fail" and rows[good]["findings"] > 0
    assert {f["evidence"]["instance_id"] for f in report["findings"]} == {good}
    assert "IL101" in {f["rule_id"] for f in report["findings"]}
    reasons = [e["message"] for e in report["errors"] if bad in e["message"]]
    assert reasons and "command Failed, exit code 94" in reasons[0] and "collection failed" in reasons[0]


@pytest.mark.slow
@pytest.mark.lane  # 20 s of waiting for the deadline
def test_fleet_deadline_cancels_and_is_inconclusive(
    moto_env: MotoEnv, clean_rootfs: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An instance that never finishes: at the deadline the command is cancelled, its row is
    inconclusive (status Cancelled), the passing instance's row stays, the fleet is inconclusive (3)."""
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    moto_env.agent.rootfs = clean_rootfs
    stuck, fine = _fleet_instances(moto_env, "gpu", 2)
    moto_env.agent.faults[stuck] = "hang"
    out = tmp_path / "fleet.json"
    options = FleetOptions(
        target="tag:Role=gpu",
        report_bucket=moto_env.bucket,
        poll=0.2,
        timeout_margin=20.0,  # the passing instance must finish well inside it, under load too
        run=RunOptions(outputs=[OutputSpec("json", out)]),
    )
    verdict = run_fleet(options)
    assert verdict.value == "inconclusive" and int(verdict.exit_code) == 3
    rows = {r["instance_id"]: r for r in json.loads(out.read_text())["facts"]["instances"]}
    assert rows[stuck]["verdict"] == "inconclusive" and rows[stuck]["status"] == "Cancelled"
    assert rows[fine]["verdict"] == "pass" and rows[fine]["status"] == "Success"
    assert wait_for(
        lambda: all(i.proc is None or i.proc.poll() is not None for i in moto_env.agent.invocations.values()),
        10,
    )


def test_fleet_sigterm_mid_soak_cancels_its_command_exit_3(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    _fleet_instances(moto_env, "gpu", 2)
    code, err = moto_env.sigterm_while_soaking(
        "fleet", "--target", "tag:Role=gpu", "--report-bucket", moto_env.bucket, "--poll", "0.2s",
        "--soak", "60s", "--soak-interval", "1s", "--max-concurrency", "2", soaking=2,
    )  # fmt: skip
    assert code == 3, err
    assert "interrupted by SIGTERM" in err
    assert {i.status for i in moto_env.agent.invocations.values()} == {"Cancelled"}
