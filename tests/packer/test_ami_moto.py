"""The shipped AMI gates, run for real: Packer 1.6.6's amazon-ebs builder against moto's server, then the
shipped shell-local commands running `imagelint ami` (with the instance-side stand-in of tests/aws).

Packer 1.6.6 cannot load the shipped templates as they are (required_plugins), so each test writes a
1.6.6 template around the *shipped* post-processor commands: the inline script and the environment
variable names come from packer/ami-gate*/ as python-hcl2 reads them.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from tests.packer.helpers import (
    AMI_GATE,
    AMI_GATE_DELETE,
    build,
    env_names,
    hcl_list,
    hcl_string,
    labelled,
    load_hcl,
)


@pytest.fixture
def aws():
    from tests.aws.moto_env import MotoEnv

    with MotoEnv() as env:
        yield env


def _gate(path: Path) -> dict:
    doc = load_hcl(path)
    build_block = doc["build"][0]
    chain = build_block.get("post-processors")
    blocks = labelled(chain[0]["post-processor"]) if chain else labelled(build_block["post-processor"])
    return next(body for label, body in blocks if label == "shell-local")  # the gate; the share step follows


def _ebs_source_ami(aws) -> str:
    """A moto built-in AMI with an EBS root device (`imagelint ami` checks EBS-backed AMIs only)."""
    images = aws.client("ec2").describe_images(
        Owners=["amazon"], Filters=[{"Name": "root-device-type", "Values": ["ebs"]}]
    )["Images"]
    return images[0]["ImageId"]


def _template(aws, *, build_id: str, post_processors: str) -> str:
    return f"""
source "amazon-ebs" "moto" {{
  region                      = "us-east-1"
  source_ami                  = {hcl_string(_ebs_source_ami(aws))}
  instance_type               = "t3.micro"
  ami_name                    = {hcl_string("imagelint-packer-" + build_id)}
  communicator                = "none"
  access_key                  = "testing"
  secret_key                  = "testing"
  custom_endpoint_ec2         = {hcl_string(aws.env["AWS_ENDPOINT_URL"])}
  skip_credential_validation  = true
  skip_region_validation      = true
  tags = {{
    "imagelint:build-id" = {hcl_string(build_id)}
  }}
}}

build {{
  sources = ["source.amazon-ebs.moto"]
  {post_processors}
}}
"""


def _shell_local(gate: dict, values: dict[str, str]) -> str:
    names = env_names(gate)
    assert set(values) == set(names), "the shipped gate's environment changed: update this test"
    env = [f"{name}={values[name]}" for name in names]
    return (
        'post-processor "shell-local" {\n'
        f"    environment_vars = {hcl_list(env)}\n"
        f"    inline = {hcl_list(gate['inline'])}\n"
        "  }"
    )


def _values(aws, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "IMAGELINT": str(Path(sys.executable).parent / "imagelint"),
        "IMAGELINT_FAIL_ON": "medium",
        "IMAGELINT_CONFIG": "",
        "IMAGELINT_SOAK_DURATION": "0",
        "IMAGELINT_VERSION": "",
        "IMAGELINT_INSTANCE_PROFILE": "",
        "IMAGELINT_REPORT_BUCKET": aws.bucket,
        "IMAGELINT_EXTRA_ARGS": f"--poll 0.2s -f json:{tmp_path / 'report.json'}",
        # moto's CreateImage snapshots hold no blocks for its EBS direct API: the offline gate is run
        # against a snapshot with a real disk in tests/packer/test_offline_gate.py
        "IMAGELINT_OFFLINE_MODE": "none",
        **extra,
    }


def _ami(aws, build_id: str) -> dict | None:
    images = aws.client("ec2").describe_images(
        Owners=["self"], Filters=[{"Name": "tag:imagelint:build-id", "Values": [build_id]}]
    )["Images"]
    return images[0] if images else None


def _tags(image: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in image.get("Tags", [])}


def _gate_and_tag(aws, tmp_path: Path, rootfs: Path):
    aws.agent.rootfs = rootfs
    build_id = str(uuid.uuid4())
    work = tmp_path / "build"
    work.mkdir()
    gate = _gate(AMI_GATE)
    chain = (
        "post-processors {\n"
        '  post-processor "manifest" {\n    output = "packer-manifest.json"\n    strip_path = true\n  }\n'
        f"  {_shell_local(gate, _values(aws, tmp_path, IMAGELINT_MANIFEST='packer-manifest.json'))}\n"
        "  }"
    )
    (work / "build.pkr.hcl").write_text(_template(aws, build_id=build_id, post_processors=chain))
    run = build(work, env={**aws.env, "PACKER_LOG": "1"})
    (tmp_path / "packer.log").write_text(run.output)
    return work, build_id, run


def test_gate_and_tag_faulty_ami_is_kept_tagged_fail_and_the_build_fails(aws, tmp_path, sample_image):
    work, build_id, run = _gate_and_tag(aws, tmp_path, sample_image)

    assert run.returncode == 1, run.output
    assert (
        "imagelint gate: " in run.output and "ami --packer-manifest packer-manifest.json --tag" in run.output
    )
    image = _ami(aws, build_id)
    assert image is not None and image["State"] == "available", "gate-and-tag must keep the AMI"
    assert _tags(image).get("imagelint:verdict") == "fail", (
        _tags(image),
        [line for line in run.output.splitlines() if "shell-local" in line][-40:],
    )
    manifest = json.loads((work / "packer-manifest.json").read_text())
    assert manifest["builds"][-1]["artifact_id"] == f"us-east-1:{image['ImageId']}"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "fail" and report["target"]["image_id"] == image["ImageId"]
    assert aws.alive() == {"instances": [], "volumes": []}


def test_gate_and_tag_clean_ami_is_tagged_pass_and_the_build_succeeds(aws, tmp_path, clean_rootfs):
    _work, build_id, run = _gate_and_tag(aws, tmp_path, clean_rootfs)

    assert run.returncode == 0, run.output
    image = _ami(aws, build_id)
    assert image is not None and _tags(image)["imagelint:verdict"] == "pass"
    assert aws.alive() == {"instances": [], "volumes": []}


def test_gate_and_delete_faulty_ami_is_deregistered_with_its_snapshots(aws, tmp_path, sample_image):
    aws.agent.rootfs = sample_image
    build_id = str(uuid.uuid4())
    work = tmp_path / "build"
    work.mkdir()
    aws_cli = shutil.which("aws", path=str(Path(sys.executable).parent))  # the real AWS CLI (test extras)
    assert aws_cli, "the AWS CLI is installed with the test extras"
    gate = _gate(AMI_GATE_DELETE)
    values = _values(
        aws,
        tmp_path,
        IMAGELINT_AWS=aws_cli,
        IMAGELINT_REGION="us-east-1",
        IMAGELINT_BUILD_ID=build_id,
        IMAGELINT_KEEP_INCONCLUSIVE="false",
    )
    (work / "build.pkr.hcl").write_text(
        _template(aws, build_id=build_id, post_processors=_shell_local(gate, values))
    )
    ec2 = aws.client("ec2")
    snapshots_before = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}

    run = build(work, env={**aws.env, "PACKER_LOG": "1"})

    assert run.returncode == 1, run.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "fail"
    ami_id = report["target"]["image_id"]
    assert "Deleting original artifact" in run.output
    assert f"Deregistering image ID ({ami_id})" in run.output
    assert _ami(aws, build_id) is None
    assert ec2.describe_images(Filters=[{"Name": "image-id", "Values": [ami_id]}])["Images"] == []
    snapshots_after = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert snapshots_after <= snapshots_before, "the AMI's snapshot outlived it"
    assert aws.alive() == {"instances": [], "volumes": []}
