"""The shipped AMI gates, run for real: `packer build` (Debian's Packer 1.6.6) of the shipped recipe
directory itself, its amazon-ebs builder against moto's server, then the shipped shell-local scripts
running `imagelint ami` (with the instance-side stand-in of tests/aws).

Packer 1.6.6 cannot load the shipped templates as they are (required_plugins), and the builder must
talk to moto: the test copies packer/ (symlinks kept, so packer/ami-gate-delete's shared files are
symlinks to packer/ami-gate's as shipped) into a directory whose path has a space, removes the
`packer {}` block, and adds moto's endpoint and test credentials to the shipped source block. Everything
else, the variables, locals, tags, post-processor chain, scripts and their environment, is as shipped.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from tests.packer.helpers import build, copy_for_packer_1_6_6, hcl_string

VENV_IMAGELINT = str(Path(sys.executable).parent / "imagelint")


@pytest.fixture
def aws():
    from tests.aws.moto_env import MotoEnv

    with MotoEnv() as env:
        yield env


def _ebs_source_ami(aws) -> str:
    """A moto built-in Linux AMI with an EBS root device (`imagelint ami` checks EBS-backed Linux AMIs
    only: moto's built-ins include Windows ones, which it refuses up front)."""
    from imagelint.aws.ec2 import foreign_platform

    images = aws.client("ec2").describe_images(
        Owners=["amazon"], Filters=[{"Name": "root-device-type", "Values": ["ebs"]}]
    )["Images"]
    return next(i["ImageId"] for i in images if foreign_platform(i) is None)


def _aws_cli() -> str:
    exe = shutil.which("aws", path=str(Path(sys.executable).parent))  # the real AWS CLI (test extras)
    assert exe, "the AWS CLI is installed with the test extras"
    return exe


def shipped_copy(aws, tmp_path: Path) -> Path:
    """packer/ copied under "checkout with space/" for Packer 1.6.6 and moto; returns the copy's root
    (the checkout). The shipped source (packer/ami-gate/source.pkr.hcl, the file both recipes load)
    gets moto's endpoint, test credentials and no communicator, before its closing brace."""
    checkout = tmp_path / "checkout with space"
    packer_dir = copy_for_packer_1_6_6(checkout / "packer")
    source = packer_dir / "ami-gate" / "source.pkr.hcl"
    assert not source.is_symlink() and (packer_dir / "ami-gate-delete" / "source.pkr.hcl").is_symlink()
    text = source.read_text()
    assert text.count('source "amazon-ebs" "image" {') == 1 and text.endswith("\n}\n")
    moto = f"""
  communicator               = "none"
  access_key                 = "testing"
  secret_key                 = "testing"
  custom_endpoint_ec2        = {hcl_string(aws.env["AWS_ENDPOINT_URL"])}
  skip_credential_validation = true
  skip_region_validation     = true
"""
    source.write_text(text[: -len("}\n")] + moto + "}\n")
    return checkout


def _vars(aws, tmp_path: Path, prefix: str, **extra: str) -> list[str]:
    values = {
        "source_ami": _ebs_source_ami(aws),
        "instance_type": "t3.micro",
        "ami_name_prefix": prefix,
        "imagelint": VENV_IMAGELINT,
        "aws": _aws_cli(),
        "report_bucket": aws.bucket,
        "instance_profile": aws.profile,
        "soak_duration": "0",
        # the report path has no space: extra_args is split on white space
        "extra_args": f"--poll 0.2s -f json:{tmp_path / 'report.json'}",
        # moto's CreateImage snapshots hold no blocks for its EBS direct API: the offline gate is run
        # against a snapshot with a real disk in tests/packer/test_offline_gate.py
        "offline_mode": "none",
        **extra,
    }
    return [arg for name, value in values.items() for arg in ("-var", f"{name}={value}")]


def _amis(aws, prefix: str) -> list[dict]:
    return aws.client("ec2").describe_images(
        Owners=["self"], Filters=[{"Name": "name", "Values": [f"{prefix}-*"]}]
    )["Images"]


def _tags(image: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in image.get("Tags", [])}


def _gate_and_tag(aws, tmp_path: Path, rootfs: Path, **extra: str):
    """`packer build .` in the copy of packer/ami-gate (path.root is ".")."""
    aws.agent.rootfs = rootfs
    prefix = f"imagelint-packer-{uuid.uuid4().hex[:8]}"
    work = shipped_copy(aws, tmp_path) / "packer" / "ami-gate"
    run = build(work, *_vars(aws, tmp_path, prefix, **extra), env={**aws.env, "PACKER_LOG": "1"})
    (tmp_path / "packer.log").write_text(run.output)
    return work, prefix, run


def test_gate_and_tag_faulty_ami_is_kept_tagged_fail_and_the_build_fails(aws, tmp_path, sample_image):
    work, prefix, run = _gate_and_tag(aws, tmp_path, sample_image)

    assert run.returncode == 1, run.output
    assert (
        "imagelint gate: " in run.output
        and "ami --tag --report-bucket=" in run.output
        and " --packer-manifest=packer-manifest.json\n" in run.output
    )
    assert "Script exited with non-zero exit status: 1" in run.output
    (image,) = _amis(aws, prefix)
    assert image["State"] == "available", "gate-and-tag must keep the AMI"
    assert _tags(image).get("imagelint:verdict") == "fail", (
        _tags(image),
        [line for line in run.output.splitlines() if "shell-local" in line][-40:],
    )
    assert "imagelint:build-id" not in _tags(image)  # gate-and-tag's source adds no tag of its own
    # ... but the candidate tag, on the AMI and its snapshots, that the narrowed policy scopes --tag to
    assert _tags(image).get("imagelint:candidate") == "true"
    snapshot_ids = [m["Ebs"]["SnapshotId"] for m in image["BlockDeviceMappings"] if "Ebs" in m]
    snapshots = aws.client("ec2").describe_snapshots(SnapshotIds=snapshot_ids)["Snapshots"]
    assert snapshots and all({"Key": "imagelint:candidate", "Value": "true"} in s["Tags"] for s in snapshots)
    manifest = json.loads((work / "packer-manifest.json").read_text())
    assert manifest["builds"][-1]["artifact_id"] == f"us-east-1:{image['ImageId']}"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "fail" and report["target"]["image_id"] == image["ImageId"]
    assert "imagelint share:" not in run.output  # the share step after a failing gate never runs
    assert aws.alive() == {"instances": [], "volumes": [], "groups": []}


@pytest.mark.slow
def test_gate_and_tag_clean_ami_is_tagged_pass_shared_and_the_build_succeeds(aws, tmp_path, clean_rootfs):
    _work, prefix, run = _gate_and_tag(aws, tmp_path, clean_rootfs, share_account_ids='["111122223333"]')

    assert run.returncode == 0, run.output
    (image,) = _amis(aws, prefix)
    assert _tags(image)["imagelint:verdict"] == "pass"
    # the share step ran after the passing gate, in the same chain
    assert f"imagelint share: {image['ImageId']} to 111122223333" in run.output
    perms = aws.client("ec2").describe_image_attribute(ImageId=image["ImageId"], Attribute="launchPermission")
    assert {"UserId": "111122223333"} in perms["LaunchPermissions"]
    assert aws.alive() == {"instances": [], "volumes": [], "groups": []}


def test_gate_and_delete_faulty_ami_is_deregistered_with_its_snapshots(aws, tmp_path, sample_image):
    """`packer build packer/ami-gate-delete` from the checkout's root: path.root is that relative path,
    and the template's shared files (variables, source, scripts) are symlinks into packer/ami-gate."""
    aws.agent.rootfs = sample_image
    prefix = f"imagelint-packer-{uuid.uuid4().hex[:8]}"
    checkout = shipped_copy(aws, tmp_path)
    ec2 = aws.client("ec2")
    snapshots_before = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}

    run = build(
        checkout / "packer" / "ami-gate-delete",
        *_vars(aws, tmp_path, prefix),
        env={**aws.env, "PACKER_LOG": "1"},
        cwd=checkout,
    )

    assert run.returncode == 1, run.output
    assert f"imagelint gate: {VENV_IMAGELINT} ami --tag " in run.output, run.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "fail"
    ami_id = report["target"]["image_id"]
    # the gate found the AMI by the build-id tag the shipped source put on it
    gate = rf"imagelint gate: {re.escape(str(VENV_IMAGELINT))} ami --tag .* -- us-east-1:{ami_id}\n"
    assert re.search(gate, run.output)
    assert "Deleting original artifact" in run.output
    assert f"Deregistering image ID ({ami_id})" in run.output
    assert _amis(aws, prefix) == []
    assert ec2.describe_images(Filters=[{"Name": "image-id", "Values": [ami_id]}])["Images"] == []
    snapshots_after = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert snapshots_after <= snapshots_before, "the AMI's snapshot outlived it"
    assert aws.alive() == {"instances": [], "volumes": [], "groups": []}
