"""The shipped gate-and-delete and share post-processor commands, run with sh as Packer's shell-local
runs them (environment from the template's names), with the real AWS CLI and the real imagelint
against moto: the share step shares and copies the AMI; keep_inconclusive keeps an AMI on exit 3."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.packer.helpers import AMI_GATE, AMI_GATE_DELETE, env_names, labelled, load_hcl
from tests.packer.test_ami_moto import _values


@pytest.fixture
def aws():
    from tests.aws.moto_env import MotoEnv

    with MotoEnv() as env:
        yield env


def _steps(path: Path) -> list[dict]:
    build = load_hcl(path)["build"][0]
    return [
        body
        for label, body in labelled(build["post-processors"][0]["post-processor"])
        if label == "shell-local"
    ]


def _run(block: dict, values: dict[str, str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert set(values) == set(env_names(block)), "the shipped step's environment changed: update this test"
    return subprocess.run(
        ["sh", "-c", "\n".join(block["inline"])],
        env={**os.environ, **env, **values},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _cli() -> str:
    exe = shutil.which("aws", path=str(Path(sys.executable).parent))
    assert exe, "the AWS CLI is installed with the test extras"
    return exe


@pytest.mark.parametrize("path", [AMI_GATE, AMI_GATE_DELETE], ids=lambda p: p.parent.name)
def test_share_step_shares_and_copies_after_the_gate(aws, path):
    ec2 = aws.client("ec2")
    name = f"imagelint-gated-{uuid.uuid4().hex[:8]}"
    runner = ec2.run_instances(ImageId=aws.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    ami = ec2.create_image(InstanceId=runner["InstanceId"], Name=name)["ImageId"]
    share = _steps(path)[-1]
    values = {
        "IMAGELINT_AWS": _cli(),
        "IMAGELINT_REGION": "us-east-1",
        "IMAGELINT_AMI_NAME": name,
        "IMAGELINT_SHARE_ACCOUNTS": "111122223333",
        "IMAGELINT_COPY_REGIONS": "eu-west-1",
    }
    proc = _run(share, values, aws.env)
    assert proc.returncode == 0, proc.stderr
    perms = ec2.describe_image_attribute(ImageId=ami, Attribute="launchPermission")["LaunchPermissions"]
    assert {"UserId": "111122223333"} in perms
    import boto3

    west = boto3.client(
        "ec2",
        region_name="eu-west-1",
        endpoint_url=aws.env["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert [i["Name"] for i in west.describe_images(Owners=["self"])["Images"]] == [name]
    # nothing to share: the step does nothing and succeeds
    quiet = _run(share, {**values, "IMAGELINT_SHARE_ACCOUNTS": "", "IMAGELINT_COPY_REGIONS": ""}, aws.env)
    assert quiet.returncode == 0 and quiet.stdout == ""


@pytest.mark.parametrize(("keep", "code"), [("false", 3), ("true", 0)])
def test_gate_and_delete_inconclusive_fails_unless_kept(aws, sample_image, tmp_path, keep, code):
    aws.agent.rootfs = sample_image
    aws.agent.online = False  # the instance never registers with SSM: exit 3
    ec2 = aws.client("ec2")
    build_id = str(uuid.uuid4())
    runner = ec2.run_instances(ImageId=aws.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    ami = ec2.create_image(
        InstanceId=runner["InstanceId"],
        Name=f"gated-{build_id[:8]}",
        TagSpecifications=[
            {"ResourceType": "image", "Tags": [{"Key": "imagelint:build-id", "Value": build_id}]}
        ],
    )["ImageId"]
    gate = _steps(AMI_GATE_DELETE)[0]
    values = _values(
        aws,
        tmp_path,
        IMAGELINT_AWS=_cli(),
        IMAGELINT_REGION="us-east-1",
        IMAGELINT_BUILD_ID=build_id,
        IMAGELINT_EXTRA_ARGS="--poll 0.2s --ssm-timeout 1s",
        IMAGELINT_KEEP_INCONCLUSIVE=keep,
    )
    proc = _run(gate, values, aws.env)
    assert proc.returncode == code, proc.stderr
    assert "never registered with SSM" in proc.stderr
    if keep == "true":
        assert f"keep_inconclusive keeps {ami}, not tagged pass" in proc.stderr
    tags = {t["Key"]: t["Value"] for t in ec2.describe_images(ImageIds=[ami])["Images"][0].get("Tags", [])}
    assert tags.get("imagelint:verdict") != "pass"
    assert aws.alive() == {"instances": [], "volumes": []}  # the gate terminated its instance
