"""The shipped templates (current Packer, with required_plugins): read with python-hcl2, and validated by
Packer 1.6.6 once the `packer {}` block it does not know is removed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.packer.helpers import (
    AMI_GATE,
    AMI_GATE_DELETE,
    CHROOT,
    PROVISIONER,
    SHIPPED,
    env_names,
    labelled,
    load_hcl,
    packer,
    strip_packer_block,
    variables,
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_requires_the_amazon_plugin_and_declares_the_user_variables(path):
    doc = load_hcl(path)
    plugins = doc["packer"][0]["required_plugins"][0]
    assert plugins["amazon"]["source"] == "github.com/hashicorp/amazon"
    declared = variables(doc)
    assert {"fail_on", "imagelint_config"} <= set(declared)
    assert declared["fail_on"]["default"] == "medium"
    if path in (AMI_GATE, AMI_GATE_DELETE):
        assert {"soak_duration", "imagelint_version", "report_bucket"} <= set(declared)
    if path is PROVISIONER:
        assert declared["imagelint_version"]["default"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_every_variable_the_commands_read_is_set(path):
    doc = load_hcl(path)
    text = path.read_text()
    build = doc["build"][0]
    blocks = labelled(build.get("provisioner", [])) + labelled(build.get("post-processor", []))
    for chain in build.get("post-processors", []):
        blocks += labelled(chain["post-processor"])
    for _label, body in blocks:
        used = set(re.findall(r"\$(IMAGELINT_\w+|IMAGELINT)\b", "\n".join(body.get("inline", []))))
        assert used <= set(env_names(body)), (path, used - set(env_names(body)))
    assert "$${" not in text  # commands read environment variables, never HCL-escaped shell expansions


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_packer_1_6_6_validates_the_template(tmp_path: Path, path):
    work = tmp_path / path.parent.name
    work.mkdir()
    for f in path.parent.iterdir():
        text = f.read_text()
        (work / f.name).write_text(strip_packer_block(text) if f.suffix == ".hcl" else text)
    run = packer(
        "validate",
        "-var",
        "source_ami=ami-03cf127a",
        *(["-var", "report_bucket=b"] if path in (AMI_GATE, AMI_GATE_DELETE) else []),
        ".",
        cwd=work,
        env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_EC2_METADATA_DISABLED": "true"},
    )
    assert run.returncode == 0, run.output


def test_ami_gate_is_manifest_then_imagelint_ami():
    build = load_hcl(AMI_GATE)["build"][0]
    chain = labelled(build["post-processors"][0]["post-processor"])
    assert [label for label, _ in chain] == [
        "manifest",
        "shell-local",
        "shell-local",
    ]  # manifest, gate, share
    assert chain[0][1]["output"] == "${var.manifest_path}"
    inline = chain[1][1]["inline"]
    assert any('ami --packer-manifest "$IMAGELINT_MANIFEST" --tag' in c for c in inline)
    assert inline[-1] == 'exec "$IMAGELINT" "$@"'


def test_ami_gate_delete_has_imagelint_first_and_no_manifest():
    build = load_hcl(AMI_GATE_DELETE)["build"][0]
    assert "post-processor" not in build  # one chain: the gate first, then the share step
    (chain,) = build["post-processors"]
    steps = labelled(chain["post-processor"])
    assert [label for label, _ in steps] == ["shell-local", "shell-local"]
    assert "IMAGELINT_BUILD_ID" in env_names(steps[0][1]) and "IMAGELINT_SHARE_ACCOUNTS" in env_names(
        steps[1][1]
    )
    assert 'post-processor "manifest"' not in AMI_GATE_DELETE.read_text()
    source = load_hcl(AMI_GATE_DELETE)["source"][0]["amazon-ebs"]["image"]
    assert source["tags"] == {"imagelint:build-id": "${local.build_id}"}


def test_provisioner_gate_order_run_download_cleanup():
    build = load_hcl(PROVISIONER)["build"][0]
    steps = labelled(build["provisioner"])
    assert [label for label, _ in steps] == ["shell", "file", "shell", "file", "shell"]
    assert steps[3][1]["direction"] == "download"
    assert any("audit / --live" in c for c in steps[2][1]["inline"])
    assert 'rm -rf "$IMAGELINT_DIR"' in steps[4][1]["inline"] and steps[4][1]["inline"][-1] == 'exit "$rc"'


def test_chroot_gate_audits_the_mount_path_last():
    doc = load_hcl(CHROOT)
    assert doc["source"][0]["amazon-chroot"]["image"]["mount_path"] == "${local.mount_path}"
    steps = labelled(doc["build"][0]["provisioner"])
    label, gate = steps[-1]
    assert label == "shell-local"
    assert env_names(gate)["IMAGELINT_ROOT"] == "${local.mount_path}"
    assert any('audit "$IMAGELINT_ROOT"' in c for c in gate["inline"])
