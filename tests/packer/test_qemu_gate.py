"""The QEMU recipe: its first post-processor audits output/disk.qcow2 before anything else runs.

Read with python-hcl2, validated by Debian's Packer 1.6.6 (its built-in qemu builder), and its gate
commands run by sh on a real qcow2 of the faulty sample image (a full `packer build` would need
qemu-system and an installer ISO): they fail the build, and pass on a clean image.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.packer.helpers import QEMU, VENV_BIN, copy_for_packer_1_6_6, labelled, load_template, packer
from tests.support import need
from tests.targets.disk import images


def _gate() -> dict:
    build = load_template(QEMU)["build"][0]
    chain = build["post-processors"][0]["post-processor"]
    (label, body), *_rest = labelled(chain)
    assert label == "shell-local"
    return body


def test_the_gate_is_the_first_post_processor_and_reads_the_builders_qcow2():
    doc = load_template(QEMU)
    source = doc["source"][0]["qemu"]["image"]
    assert source["format"] == "qcow2"
    gate = _gate()
    env = dict(e.split("=", 1) for e in gate["environment_vars"])
    assert env["IMAGELINT_IMAGE"] == "${local.image}"
    assert doc["locals"][0]["image"] == f"{doc['locals'][0]['output_directory']}/{source['vm_name']}"
    assert any(line == 'set -- "$@" -- "$IMAGELINT_IMAGE"' for line in gate["inline"])


def test_packer_1_6_6_validates_the_template(tmp_path: Path):
    work = copy_for_packer_1_6_6(tmp_path / "packer") / QEMU.name
    result = packer(
        "validate",
        "-var",
        "iso_url=https://example.invalid/a.iso",
        "-var",
        "iso_checksum=none",
        ".",
        cwd=work,
    )
    assert result.returncode == 0, result.output


def _run_gate(image: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    gate = _gate()
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "NO_COLOR": "1"}
    env.update(
        IMAGELINT="imagelint", IMAGELINT_IMAGE=str(image), IMAGELINT_FAIL_ON="medium",
        IMAGELINT_CONFIG="", IMAGELINT_REPORT=str(cwd / "report.json"),
    )  # fmt: skip
    script = "\n".join(gate["inline"])
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, cwd=cwd, check=False)


def test_the_gate_commands_fail_on_the_faulty_qcow2(debian_rootfs: Path, tmp_path: Path):
    need(shutil.which("qemu-img") is not None, "qemu-img is not installed")
    fs = images.ext4_fs(debian_rootfs)
    qcow2 = images.cached("gpt-ext4.qcow2", lambda out: images.convert(
        images.cached("gpt-ext4.raw", lambda raw: images.gpt(fs, raw)), out, "qcow2"))  # fmt: skip
    proc = _run_gate(qcow2, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "imagelint gate: imagelint audit" in proc.stdout
    assert (tmp_path / "report.json").exists()
