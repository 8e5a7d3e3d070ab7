"""The AMI gates' offline part, run for real: the shipped shell-local script of packer/ami-gate, with
its environment as the template sets it, against an AMI on moto whose root snapshot holds the faulty
Debian disk. The offline gate (``imagelint ami --mode snapshot``) fails it before any instance is
launched, and tags the verdict on the AMI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import MotoEnv
from tests.packer.helpers import AMI_GATE, env_names, labelled, load_hcl


def _inline() -> list[str]:
    build = load_hcl(AMI_GATE)["build"][0]
    steps = labelled(build["post-processors"][0]["post-processor"])
    gate = next(body for label, body in steps if label == "shell-local")
    assert "IMAGELINT_OFFLINE_MODE" in env_names(gate)
    assert "${var.offline_mode}" in " ".join(gate["environment_vars"])
    return list(gate["inline"])


def test_the_snapshot_mode_default_is_declared() -> None:
    variables = {k: v for block in load_hcl(AMI_GATE)["variable"] for k, v in block.items()}
    assert variables["offline_mode"]["default"] == "snapshot"


def test_the_offline_gate_fails_a_faulty_ami_before_launching(faulty_disk: Path, tmp_path: Path) -> None:
    run_uuid = str(uuid.uuid4())
    with MotoEnv() as aws:
        snapshot_id, _ = upload_image(aws.client("ebs", direct=True), faulty_disk)
        image_id = register_image(aws.client("ec2"), snapshot_id)
        manifest = tmp_path / "packer-manifest.json"
        build = {"name": "image", "artifact_id": f"us-east-1:{image_id}", "packer_run_uuid": run_uuid}
        manifest.write_text(json.dumps({"builds": [build], "last_run_uuid": run_uuid}))
        env = {
            **os.environ,
            **aws.env,
            "NO_COLOR": "1",
            "PACKER_RUN_UUID": run_uuid,
            "IMAGELINT": str(Path(sys.executable).parent / "imagelint"),
            "IMAGELINT_MANIFEST": str(manifest),
            "IMAGELINT_FAIL_ON": "medium",
            "IMAGELINT_CONFIG": "",
            "IMAGELINT_SOAK_DURATION": "0",
            "IMAGELINT_VERSION": "",
            "IMAGELINT_INSTANCE_PROFILE": "",
            "IMAGELINT_REPORT_BUCKET": aws.bucket,
            "IMAGELINT_EXTRA_ARGS": "--poll 0.2s",
            "IMAGELINT_OFFLINE_MODE": "snapshot",
        }
        proc = subprocess.run(
            ["sh", "-c", "\n".join(_inline())],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        tags = {
            t["Key"]: t["Value"]
            for t in aws.client("ec2").describe_images(ImageIds=[image_id])["Images"][0].get("Tags", [])
        }
        launched = aws.launched()
    assert proc.returncode == 1, proc.stderr
    assert "imagelint gate (offline):" in proc.stdout and "--mode snapshot" in proc.stdout
    assert "imagelint gate: " not in proc.stdout  # the launch step never ran
    assert launched == []
    assert tags["imagelint:verdict"] == "fail"
