"""The AMI gates' offline part, run for real: the shipped gate script (packer/ami-gate/imagelint-ami-gate.sh,
which packer/ami-gate-delete runs through its symlink) under dash, with the environment each template
sets, against an AMI on moto whose root snapshot holds the faulty Debian disk. The offline gate
(``imagelint ami --mode=snapshot``) fails it before any instance is launched, and tags the verdict on
the AMI: found by the manifest (gate-and-tag) or by its imagelint:build-id tag (gate-and-delete)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import MotoEnv
from tests.packer.helpers import (
    AMI_GATE,
    AMI_GATE_DELETE,
    env_names,
    gate_env,
    load_template,
    run_script,
    shell_local_steps,
    step_script,
    variables,
)


def test_the_snapshot_mode_default_is_declared() -> None:
    for recipe in (AMI_GATE, AMI_GATE_DELETE):
        assert variables(load_template(recipe))["offline_mode"]["default"] == "snapshot"
        gate = shell_local_steps(recipe)[0]
        assert env_names(gate)["IMAGELINT_OFFLINE_MODE"] == "${var.offline_mode}"


@pytest.mark.parametrize("recipe", [AMI_GATE, AMI_GATE_DELETE], ids=lambda p: p.name)
def test_the_offline_gate_fails_a_faulty_ami_before_launching(
    faulty_disk: Path, tmp_path: Path, recipe
) -> None:
    gate = shell_local_steps(recipe)[0]
    run_uuid = str(uuid.uuid4())
    build_id = str(uuid.uuid4())
    with MotoEnv() as aws:
        snapshot_id, _ = upload_image(aws.client("ebs", direct=True), faulty_disk)
        ec2 = aws.client("ec2")
        image_id = register_image(ec2, snapshot_id)
        ec2.create_tags(Resources=[image_id], Tags=[{"Key": "imagelint:build-id", "Value": build_id}])
        manifest = tmp_path / "packer-manifest.json"
        build = {"name": "image", "artifact_id": f"us-east-1:{image_id}", "packer_run_uuid": run_uuid}
        manifest.write_text(json.dumps({"builds": [build], "last_run_uuid": run_uuid}))
        aws_cli = shutil.which("aws", path=str(Path(sys.executable).parent))
        assert aws_cli, "the AWS CLI is installed with the test extras"
        values = gate_env(
            IMAGELINT_MANIFEST=str(manifest) if recipe is AMI_GATE else "",
            IMAGELINT_BUILD_ID=build_id if recipe is AMI_GATE_DELETE else "",
            IMAGELINT_AWS=aws_cli,
            IMAGELINT_REPORT_BUCKET=aws.bucket,
            IMAGELINT_OFFLINE_MODE="snapshot",
        )
        assert set(values) == set(env_names(gate)), "the shipped gate's environment changed: update this test"
        env = {**os.environ, **aws.env, "NO_COLOR": "1", "PACKER_RUN_UUID": run_uuid, **values}
        proc = run_script(step_script(recipe, gate), env, cwd=tmp_path)
        tags = {
            t["Key"]: t["Value"]
            for t in ec2.describe_images(ImageIds=[image_id])["Images"][0].get("Tags", [])
        }
        launched = aws.launched()
    assert proc.returncode == 1, proc.stderr
    target = f"--packer-manifest={manifest}" if recipe is AMI_GATE else f"-- us-east-1:{image_id}"
    assert (
        f"imagelint gate (offline): {values['IMAGELINT']} ami --mode=snapshot --tag --fail-on=medium "
        f"{target}\n" in proc.stdout
    )
    assert "imagelint gate: " not in proc.stdout  # the launch step never ran
    assert launched == []
    assert tags["imagelint:verdict"] == "fail"
