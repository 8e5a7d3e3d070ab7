"""The shipped gate and share scripts, run under dash as the templates' shell-local steps run them
(environment from each template's names), with the real AWS CLI and the real imagelint against moto:
the share step shares and copies the AMI; keep_inconclusive keeps an AMI on exit 3. And the gate's own
refusals: another imagelint version (exit 2), no AMI with the build id (exit 3), no way to find the AMI
(exit 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.packer.helpers import (
    AMI_GATE,
    AMI_GATE_DELETE,
    AMI_RECIPES,
    env_names,
    gate_env,
    run_script,
    shell_local_steps,
    step_script,
)

IMAGELINT = str(Path(sys.executable).parent / "imagelint")


@pytest.fixture
def aws():
    from tests.aws.moto_env import MotoEnv

    with MotoEnv() as env:
        yield env


def _run(
    recipe: Path, step: int, values: dict[str, str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Step ``step`` (0: the gate, 1: the share step) of the recipe's chain: its script under dash."""
    block = shell_local_steps(recipe)[step]
    assert set(values) == set(env_names(block)), "the shipped step's environment changed: update this test"
    return run_script(step_script(recipe, block), {**os.environ, **env, **values}, timeout=180)


def _cli() -> str:
    exe = shutil.which("aws", path=str(Path(sys.executable).parent))
    assert exe, "the AWS CLI is installed with the test extras"
    return exe


@pytest.mark.parametrize("recipe", AMI_RECIPES, ids=lambda p: p.name)
def test_share_step_shares_and_copies_after_the_gate(aws, recipe):
    ec2 = aws.client("ec2")
    name = f"imagelint-gated-{uuid.uuid4().hex[:8]}"
    runner = ec2.run_instances(ImageId=aws.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    ami = ec2.create_image(InstanceId=runner["InstanceId"], Name=name)["ImageId"]
    values = {
        "IMAGELINT_AWS": _cli(),
        "IMAGELINT_REGION": "us-east-1",
        "IMAGELINT_AMI_NAME": name,
        "IMAGELINT_SHARE_ACCOUNTS": "111122223333",
        "IMAGELINT_COPY_REGIONS": "eu-west-1",
    }
    proc = _run(recipe, 1, values, aws.env)
    assert proc.returncode == 0, proc.stderr
    assert f"imagelint share: {ami} to 111122223333" in proc.stdout
    assert f"imagelint share: copying {ami} to eu-west-1" in proc.stdout
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
    quiet = _run(recipe, 1, {**values, "IMAGELINT_SHARE_ACCOUNTS": "", "IMAGELINT_COPY_REGIONS": ""}, aws.env)
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
    values = gate_env(
        IMAGELINT_REPORT_BUCKET=aws.bucket,
        IMAGELINT_INSTANCE_PROFILE=aws.profile,
        IMAGELINT_AWS=_cli(),
        IMAGELINT_BUILD_ID=build_id,
        IMAGELINT_EXTRA_ARGS="--poll 0.2s --ssm-timeout 1s",
        IMAGELINT_KEEP_INCONCLUSIVE=keep,
    )
    proc = _run(AMI_GATE_DELETE, 0, values, aws.env)
    assert proc.returncode == code, proc.stderr
    assert f"imagelint gate: {IMAGELINT} ami --tag " in proc.stdout
    assert f" -- us-east-1:{ami}\n" in proc.stdout
    assert "never registered with SSM" in proc.stderr
    warning = (
        f"imagelint gate: WARNING: inconclusive (exit 3); keep_inconclusive keeps {ami}, not tagged pass\n"
    )
    assert (warning in proc.stderr) == (keep == "true")
    tags = {t["Key"]: t["Value"] for t in ec2.describe_images(ImageIds=[ami])["Images"][0].get("Tags", [])}
    assert tags.get("imagelint:verdict") != "pass"
    assert aws.alive() == {"instances": [], "volumes": [], "groups": []}  # the gate terminated its instance


@pytest.mark.parametrize("recipe", AMI_RECIPES, ids=lambda p: p.name)
def test_the_gate_refuses_another_imagelint_version(tmp_path, recipe):
    """IMAGELINT_VERSION set: any other `imagelint --version` stops the gate at once, exit 2."""
    values = gate_env(IMAGELINT_VERSION="9.9.9")
    if recipe is AMI_GATE:
        values.update(IMAGELINT_MANIFEST=str(tmp_path / "packer-manifest.json"))
    else:
        values.update(IMAGELINT_BUILD_ID=str(uuid.uuid4()), IMAGELINT_AWS=str(tmp_path / "no-aws-cli"))
    proc = _run(recipe, 0, values, {"PATH": os.environ["PATH"]})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"imagelint gate: {IMAGELINT} is not imagelint 9.9.9\n" and proc.stdout == ""


def test_the_gate_says_when_no_ami_has_the_build_id(tmp_path):
    """describe-images by tag is retried 10 times (eventually consistent); then exit 3. The AWS CLI and
    sleep are stand-ins here (the retries would sleep 165 s): the script runs them from PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "fake-aws").write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\necho None\n')
    (bin_dir / "sleep").write_text(f'#!/bin/sh\necho "sleep $*" >> "{calls}"\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    build_id = str(uuid.uuid4())
    values = gate_env(IMAGELINT_BUILD_ID=build_id, IMAGELINT_AWS="fake-aws")
    proc = _run(AMI_GATE_DELETE, 0, values, {"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == f"imagelint gate: no AMI tagged imagelint:build-id={build_id}\n"
    lines = calls.read_text().splitlines()
    lookup = (
        "ec2 describe-images --region=us-east-1 --owners self "
        f"--filters Name=tag:imagelint:build-id,Values={build_id} --query Images[0].ImageId --output text"
    )
    assert lines == [line for i in range(1, 11) for line in (lookup, f"sleep {i * 3}")]


@pytest.mark.parametrize(
    ("manifest", "build_id"), [("", ""), ("packer-manifest.json", "0f1e2d3c")], ids=["neither", "both"]
)
def test_the_gate_needs_exactly_one_way_to_find_the_ami(manifest, build_id):
    values = gate_env(IMAGELINT_MANIFEST=manifest, IMAGELINT_BUILD_ID=build_id)
    proc = _run(AMI_GATE_DELETE, 0, values, {"PATH": os.environ["PATH"]})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "imagelint gate: set one of IMAGELINT_MANIFEST (gate-and-tag)"
        " and IMAGELINT_BUILD_ID (gate-and-delete)\n"
    )
