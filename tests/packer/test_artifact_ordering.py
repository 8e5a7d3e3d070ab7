"""Where the imagelint gate sits decides whether Packer keeps the artifact when the gate fails.

Verified with real `packer build` runs of the `file` builder, whose artifact is a file: Packer
destroying the artifact deletes that file, exactly as destroying an amazon-ebs artifact deregisters
the AMI and deletes its snapshots (see packer/README.md, "gate-and-delete" and "gate-and-tag").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.packer.helpers import build, hcl_list

GATE_COMMANDS = [
    'echo "$PACKER_RUN_UUID" > gate-saw-run-uuid.txt',
    'imagelint audit -f text -- "$IMAGELINT_ROOT"',
]
GATE = (
    'post-processor "shell-local" {\n'
    '    environment_vars = ["IMAGELINT_ROOT=${var.image_root}"]\n'
    f"    inline = {hcl_list(GATE_COMMANDS)}\n"
    "  }"
)
MANIFEST = 'post-processor "manifest" {\n    output = "packer-manifest.json"\n    strip_path = true\n  }'

SHAPES = {
    # imagelint is the only post-processor
    "gate-only": GATE,
    # imagelint first in a chain, manifest after it (never reached when the gate fails)
    "gate-then-manifest": f"post-processors {{\n  {GATE}\n  {MANIFEST}\n  }}",
    # the recipe of packer/ami-gate: manifest first, then imagelint
    "manifest-then-gate": f"post-processors {{\n  {MANIFEST}\n  {GATE}\n  }}",
    # two separate sequences: a manifest block and a gate block
    "manifest-block-and-gate-block": f"{MANIFEST}\n  {GATE}",
    # the failing gate's block first, the manifest's block after it: still kept (in any separate block)
    "gate-block-and-manifest-block": f"{GATE}\n  {MANIFEST}",
}


def _template(post_processors: str) -> str:
    return f"""
variable "image_root" {{
  type = string
}}

source "file" "image" {{
  content = "stand-in for the AMI"
  target  = "artifact.txt"
}}

build {{
  sources = ["source.file.image"]
  {post_processors}
}}
"""


def _run(tmp_path: Path, shape: str, image: Path):
    work = tmp_path / shape
    work.mkdir()
    (work / "build.pkr.hcl").write_text(_template(SHAPES[shape]))
    run = build(work, "-var", f"image_root={image}", env={"PACKER_LOG": "1"})
    return work, run


@pytest.mark.parametrize("shape", ["gate-only", "gate-then-manifest"])
def test_gate_and_delete_a_failing_first_gate_destroys_the_artifact(tmp_path, sample_image, shape):
    work, run = _run(tmp_path, shape, sample_image)
    assert run.returncode == 1, run.output
    assert "Post-processor failed: Script exited with non-zero exit status: 1" in run.output
    assert (work / "gate-saw-run-uuid.txt").exists(), "the gate did not run"
    assert "Deleting original artifact" in run.output
    assert not (work / "artifact.txt").exists(), "Packer kept the artifact of a failed gate"
    assert not (work / "packer-manifest.json").exists()


@pytest.mark.parametrize(
    "shape", ["manifest-then-gate", "manifest-block-and-gate-block", "gate-block-and-manifest-block"]
)
def test_gate_and_tag_with_a_manifest_first_the_artifact_is_kept_and_the_build_fails(
    tmp_path, sample_image, shape
):
    work, run = _run(tmp_path, shape, sample_image)
    assert run.returncode == 1, run.output
    assert "Flagging to keep original artifact from post-processor 'manifest'" in run.output
    assert "Deleting original artifact" not in run.output
    assert (work / "artifact.txt").read_text() == "stand-in for the AMI"
    # The manifest entry of this run is the one the gate can find by $PACKER_RUN_UUID.
    manifest = json.loads((work / "packer-manifest.json").read_text())
    seen = (work / "gate-saw-run-uuid.txt").read_text().strip()
    assert seen and [b["packer_run_uuid"] for b in manifest["builds"]] == [seen]
    assert manifest["last_run_uuid"] == seen


def test_passing_gate_keeps_the_artifact_and_the_build_succeeds(tmp_path, clean_rootfs):
    work, run = _run(tmp_path, "manifest-then-gate", clean_rootfs)
    assert run.returncode == 0, run.output
    assert (work / "artifact.txt").exists()
    assert "Deleting original artifact" not in run.output


def test_gate_and_delete_a_passing_gate_keeps_the_artifact(tmp_path, clean_rootfs):
    """In the gate-and-delete shape a passing gate keeps the artifact: shell-local flags it as kept."""
    work, run = _run(tmp_path, "gate-only", clean_rootfs)
    assert run.returncode == 0, run.output
    assert "Flagging to keep original artifact from post-processor 'shell-local'" in run.output
    assert "Deleting original artifact" not in run.output
    assert (work / "artifact.txt").exists()
