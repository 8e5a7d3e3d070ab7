"""Windows and macOS AMIs are refused (exit 2, one line) before any request that creates or costs
anything (imagelint/aws/ec2.py ``foreign_platform``, imagelint/commands/ami.py ``_describe_all``), in
every mode and among several AMIs; the front records every call that was made."""

from __future__ import annotations

import pytest

from tests.aws.moto_env import MotoEnv
from tests.support import run_cli

# what a refused run must not have asked for (query-protocol Actions: EC2, IAM)
CREATING = {
    "RunInstances",
    "CreateVolume",
    "CreateSecurityGroup",
    "CreateRole",
    "CreateInstanceProfile",
    "CreateTags",
}


def _windows_ami(env: MotoEnv) -> str:
    """One of moto's built-in Windows AMIs (``Platform: windows``)."""
    images = env.client("ec2").describe_images(Filters=[{"Name": "platform", "Values": ["windows"]}])[
        "Images"
    ]
    return str(sorted(i["ImageId"] for i in images if i["RootDeviceType"] == "ebs")[0])


def _ami(env: MotoEnv, *args: str):
    env.seen_calls.clear()
    return run_cli(
        "ami", *args, "--report-bucket", env.bucket, "--create-profile", "--poll", "0.2s",
        env=env.env, timeout=120,
    )  # fmt: skip


def _nothing_created(env: MotoEnv) -> None:
    actions = {action for _, action in env.seen_calls}
    assert "DescribeImages" in actions and not actions & CREATING, sorted(actions)
    assert env.client("s3").list_objects_v2(Bucket=env.bucket).get("KeyCount") == 0  # not even run.json
    assert env.launched() == []


@pytest.mark.parametrize("mode", ["launch", "volume", "snapshot"])
def test_a_windows_ami_is_refused_before_anything_is_created(moto_env: MotoEnv, mode: str) -> None:
    windows = _windows_ami(moto_env)
    proc = _ami(moto_env, windows, "--mode", mode)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"imagelint: error: {windows} is a Windows AMI: imagelint checks Linux images; "
        "nothing was launched or created"
    ]
    _nothing_created(moto_env)


def test_a_macos_ami_is_refused_before_anything_is_created(moto_env: MotoEnv) -> None:
    moto_env.image_fields[moto_env.image_id] = {"architecture": "arm64_mac"}  # moto cannot register one
    proc = _ami(moto_env, moto_env.image_id)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"{moto_env.image_id} is a macOS (arm64_mac) AMI" in line
    _nothing_created(moto_env)


def test_a_windows_ami_among_several_stops_all_before_any_launch(moto_env: MotoEnv) -> None:
    proc = _ami(moto_env, moto_env.image_id, _windows_ami(moto_env), "--parallel", "2")
    assert proc.returncode == 2, proc.stderr
    assert "is a Windows AMI" in proc.stderr.strip().splitlines()[-1]
    _nothing_created(moto_env)
