"""`--on-fail deregister|deprecate` against moto: a failing AMI, its snapshots, a passing AMI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.aws.moto_env import MotoEnv
from tests.support import run_cli

FAST = ("--poll", "0.2s", "--soak", "0", "--instance-profile", MotoEnv.profile)


def _own_image(env: MotoEnv) -> tuple[str, list[str]]:
    """An AMI of this account (CreateImage from a plain instance) and its snapshots."""
    ec2 = env.client("ec2")
    iid = ec2.run_instances(ImageId=env.image_id, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=iid, Name="candidate")["ImageId"]
    ec2.terminate_instances(InstanceIds=[iid])
    image = ec2.describe_images(ImageIds=[ami])["Images"][0]
    snapshots = [m["Ebs"]["SnapshotId"] for m in image["BlockDeviceMappings"] if "Ebs" in m]
    assert snapshots
    return ami, snapshots


def _image_exists(env: MotoEnv, ami: str) -> bool:
    return bool(env.client("ec2").describe_images(Filters=[{"Name": "image-id", "Values": [ami]}])["Images"])


def _snapshots_left(env: MotoEnv, snapshots: list[str]) -> list[str]:
    reply = env.client("ec2").describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": snapshots}])
    return [s["SnapshotId"] for s in reply["Snapshots"]]


def test_deregister_removes_a_failing_ami_and_its_snapshots(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    ami, snapshots = _own_image(moto_env)
    out = tmp_path / "r.json"
    proc = run_cli(
        "ami", ami, "--report-bucket", moto_env.bucket, "--on-fail", "deregister", "-f", f"json:{out}",
        *FAST, env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert json.loads(out.read_text())["verdict"] == "fail"
    assert f"deregistered {ami}" in proc.stderr and snapshots[0] in proc.stderr
    assert not _image_exists(moto_env, ami)
    assert _snapshots_left(moto_env, snapshots) == []  # documented: its snapshots are deleted too
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_deregister_leaves_a_passing_ami_alone(moto_env: MotoEnv, clean_rootfs: Path) -> None:
    moto_env.agent.rootfs = clean_rootfs
    ami, snapshots = _own_image(moto_env)
    proc = run_cli(
        "ami", ami, "--report-bucket", moto_env.bucket, "--on-fail", "deregister", *FAST, env=moto_env.env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "deregistered" not in proc.stderr
    assert _image_exists(moto_env, ami)
    assert _snapshots_left(moto_env, snapshots) == snapshots
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_deprecate_unsupported_by_the_endpoint_is_one_line_exit_3(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    """moto 5.2 has no EnableImageDeprecation (it answers with an error page): one line naming the API
    and the error code, exit 3; the report is written and tagged first, the instance is gone."""
    moto_env.agent.rootfs = sample_image
    ami, _ = _own_image(moto_env)
    out = tmp_path / "r.json"
    proc = run_cli(
        "ami", ami, "--report-bucket", moto_env.bucket, "--on-fail", "deprecate", "--tag",
        "-f", f"json:{out}", *FAST, env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("imagelint: error: ec2 EnableImageDeprecation failed: ResponseParserError: "), last
    assert "Traceback" not in proc.stderr
    assert json.loads(out.read_text())["verdict"] == "fail"  # written before the on-fail action
    tags = moto_env.client("ec2").describe_tags(Filters=[{"Name": "resource-id", "Values": [ami]}])["Tags"]
    assert {t["Key"]: t["Value"] for t in tags}["imagelint:verdict"] == "fail"
    assert _image_exists(moto_env, ami)
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_on_fail_on_another_accounts_ami_is_refused_before_anything_runs(moto_env: MotoEnv) -> None:
    """moto's stock AMIs are owned by another account (a shared or public AMI, as AWS has them): only
    the owner can deregister or deprecate one, so --on-fail is refused up front, not after the check."""
    ec2 = moto_env.client("ec2")
    owner = ec2.describe_images(ImageIds=[moto_env.image_id])["Images"][0]["OwnerId"]
    assert owner != moto_env.client("sts").get_caller_identity()["Account"]
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--on-fail", "deprecate", *FAST,
        env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"is owned by account {owner}, not this one" in lines[0], proc.stderr
    assert moto_env.launched() == [] and moto_env.alive()["groups"] == []
