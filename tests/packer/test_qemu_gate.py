"""The QEMU recipe: its first post-processor audits output/disk.qcow2 before anything else runs; its
second, with -var soak=DURATION, boots that qcow2 with `imagelint vm check`.

Read with python-hcl2, validated by Debian's Packer 1.6.6 (its built-in qemu builder), and its gate
commands run by sh on a real qcow2 of the faulty sample image (a full `packer build` would need
qemu-system and an installer ISO): they fail the build, and pass on a clean image. The chain itself
is run by a real `packer build` of the recipe with its qemu source swapped for a null one, on the
bootable test qcow2 (scripts/build-test-vm-image.sh): the soak skipped when empty, a refused soak
failing the build. The suite boots a machine once, through the Action
(tests/github/test_action_soak.py); a real boot through this chain is not repeated here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.packer.helpers import (
    QEMU,
    VENV_BIN,
    build,
    copy_for_packer_1_6_6,
    labelled,
    load_template,
    packer,
    variables,
)
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


# --- the soak step: the second post-processor boots the qcow2 with `imagelint vm check` -----------


def _soak() -> dict:
    build = load_template(QEMU)["build"][0]
    (_gate_label, _), (label, body), *_rest = labelled(build["post-processors"][0]["post-processor"])
    assert label == "shell-local"
    return body


def test_the_soak_is_the_second_post_processor_on_the_same_qcow2_and_off_by_default():
    doc = load_template(QEMU)
    soak = _soak()
    env = dict(e.split("=", 1) for e in soak["environment_vars"])
    assert env["IMAGELINT_IMAGE"] == "${local.image}" and env["IMAGELINT_SOAK"] == "${var.soak}"
    assert variables(doc)["soak"]["default"] == ""
    assert any(line == 'set -- "$@" -- "$IMAGELINT_IMAGE"' for line in soak["inline"])


def _null_recipe(dest: Path, image: Path) -> Path:
    """The QEMU recipe with its qemu source swapped for a null one (same name), the build's qcow2
    at output/disk.qcow2 already: Packer runs the recipe's own post-processor chain on it."""
    work = copy_for_packer_1_6_6(dest / "packer") / QEMU.name
    path = work / "imagelint-qemu-gate.pkr.hcl"
    text = path.read_text()
    start = text.index('source "qemu" "image" {')
    end = text.index("\n}\n", start) + 3
    text = text[:start] + 'source "null" "image" {\n  communicator = "none"\n}\n' + text[end:]
    path.write_text(text.replace('"source.qemu.image"', '"source.null.image"'))
    (work / "output").mkdir()
    (work / "output" / "disk.qcow2").symlink_to(image)
    return work


@pytest.fixture(scope="module")
def clean_vm_image() -> Path:
    """The bootable clean Debian 12 qcow2 (scripts/build-test-vm-image.sh): offline, no finding at
    critical, so with fail_on=critical the audit gate lets the chain reach the soak step."""
    from tests.vm.conftest import vm_image

    need(shutil.which("qemu-img") is not None, "qemu-img is not installed (Debian: qemu-utils)")
    return vm_image("clean")


ISO_VARS = ("-var", "iso_url=https://example.invalid/a.iso", "-var", "iso_checksum=none")


def test_packer_runs_the_chain_and_skips_the_soak_when_soak_is_empty(tmp_path: Path, clean_vm_image: Path):
    work = _null_recipe(tmp_path, clean_vm_image)
    run = build(work, *ISO_VARS, "-var", "fail_on=critical")
    assert run.returncode == 0, run.output
    assert "imagelint gate: imagelint audit --fail-on=critical" in run.output
    assert "imagelint soak: skipped (soak is empty)" in run.output
    assert not (work / "imagelint-vm-report.json").exists()


@pytest.mark.parametrize("soak", ["forever", "-h"])
def test_a_refused_soak_fails_the_chain_after_the_audit(tmp_path: Path, clean_vm_image: Path, soak: str):
    """The soak reaches vm check as --soak's own argument (never an option: `-h` is no help page):
    vm check refuses it (exit 2) before any boot, and the build fails at the soak step."""
    work = _null_recipe(tmp_path, clean_vm_image)
    run = build(work, *ISO_VARS, "-var", "fail_on=critical", "-var", f"soak={soak}")
    assert run.returncode != 0, run.output
    assert "(shell-local): PASS" in run.output  # the audit gate passed first
    assert (
        f"imagelint soak: imagelint vm check --soak={soak} --firmware=bios --fail-on=critical" in run.output
    )
    assert "Post-processor failed: Script exited with non-zero exit status: 2" in run.output
    assert "vm: booting" not in run.output and "Usage:" not in run.output
