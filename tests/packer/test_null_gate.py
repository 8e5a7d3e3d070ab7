"""A real `packer build` (null builder) whose shell-local post-processor runs imagelint on an image tree.

The oracle is Packer itself: its exit code, its output (imagelint's findings, prefixed by Packer),
and the JSON report the gate writes.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.packer.helpers import TEMPLATES, VENV_BIN, build


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "build"
    shutil.copytree(TEMPLATES / "null-gate", work)
    return work


def test_faulty_sample_image_fails_the_build_and_shows_the_findings(tmp_path, sample_image):
    work = _workdir(tmp_path)
    run = build(work, "-var", f"image_root={sample_image}")

    assert run.returncode != 0, run.output
    assert "Post-processor failed: Script exited with non-zero exit status: 1" in run.output
    # The imagelint that ran is this checkout's, from the venv (first in PATH).
    assert f"imagelint gate: {VENV_BIN / 'imagelint'} audit " in run.output
    assert f" -- {sample_image}\n" in run.output  # the tree after `--`, never read as an option
    report = json.loads((work / "imagelint-report.json").read_text())
    assert report["verdict"] == "fail"
    failing = {f["rule_id"] for f in report["findings"] if f["failing"]}
    assert {"IL206", "IL108"} <= failing  # the ecs loop (IL203 is part of it), the cloud-init leftover
    # Packer relays imagelint's text report, one line per finding, under the build's name.
    for rule_id in failing:
        assert re.search(rf"\(shell-local\): (CRITICAL|HIGH|MEDIUM|LOW|INFO) {rule_id} ", run.output), rule_id
    assert "null.image (shell-local): FAIL:" in run.output
    assert "ecs.service" in run.output


def test_clean_image_passes_the_build(tmp_path, clean_rootfs):
    work = _workdir(tmp_path)
    run = build(work, "-var", f"image_root={clean_rootfs}")

    assert run.returncode == 0, run.output
    assert "null.image (shell-local): PASS" in run.output
    assert "Build 'null.image' finished" in run.output
    report = json.loads((work / "imagelint-report.json").read_text())
    assert report["verdict"] == "pass"


def test_variables_reach_imagelint_config_and_fail_on(tmp_path, sample_image):
    """The template's variables are passed through: a config that ignores every rule makes the gate pass."""
    work = _workdir(tmp_path)
    (work / "waive-all.yaml").write_text("version: 1\nignore: ['*']\n")
    run = build(
        work,
        "-var",
        f"image_root={sample_image}",
        "-var",
        "imagelint_config=waive-all.yaml",
        "-var",
        "fail_on=critical",
    )
    assert run.returncode == 0, run.output
    assert "--fail-on=critical" in run.output and "--config=waive-all.yaml" in run.output
    assert json.loads((work / "imagelint-report.json").read_text())["verdict"] == "pass"


def test_unreadable_target_is_inconclusive_and_fails_the_build(tmp_path):
    """A gate never passes on data it did not see: a missing image root exits 3 and fails the build."""
    work = _workdir(tmp_path)
    run = build(work, "-var", f"image_root={tmp_path / 'no-such-image'}")
    assert run.returncode != 0, run.output
    assert "Script exited with non-zero exit status: 3" in run.output


def test_an_empty_image_root_is_inconclusive_and_fails_the_build(tmp_path):
    """A mount that failed leaves an empty directory: no OS root's marks, exit 3, the build fails."""
    work = _workdir(tmp_path)
    empty = tmp_path / "mnt"
    empty.mkdir()
    run = build(work, "-var", f"image_root={empty}")
    assert run.returncode != 0, run.output
    assert "Script exited with non-zero exit status: 3" in run.output
    assert "not an operating system's root" in run.output
