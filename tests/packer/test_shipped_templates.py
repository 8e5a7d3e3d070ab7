"""The shipped templates (current Packer, with required_plugins): each recipe directory read with
python-hcl2 (every *.pkr.hcl, merged, as Packer loads them), and validated by Packer 1.6.6 once the
`packer {}` block it does not know is removed. The two AMI recipes share their variables, source and
scripts: packer/ami-gate-delete's copies are symlinks to packer/ami-gate's."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.packer.helpers import (
    AMI_GATE,
    AMI_GATE_DELETE,
    AMI_RECIPES,
    CHROOT,
    PACKER_DIR,
    PROVISIONER,
    SHIPPED,
    copy_for_packer_1_6_6,
    env_names,
    labelled,
    load_template,
    locals_of,
    packer,
    script_reads,
    shell_local_steps,
    step_script,
    template_files,
    variables,
)
from tests.support import REPO

# What packer/ami-gate-delete takes from packer/ami-gate, as relative symlinks.
SHARED = ["variables.pkr.hcl", "source.pkr.hcl", "imagelint-ami-gate.sh", "imagelint-ami-share.sh"]


@pytest.mark.parametrize("recipe", SHIPPED, ids=lambda p: p.name)
def test_requires_the_amazon_plugin_and_declares_the_user_variables(recipe):
    doc = load_template(recipe)
    (packer_block,) = doc["packer"]
    plugins = packer_block["required_plugins"][0]
    assert plugins["amazon"]["source"] == "github.com/hashicorp/amazon"
    declared = variables(doc)
    assert {"fail_on", "imagelint_config"} <= set(declared)
    assert declared["fail_on"]["default"] == "medium"
    if recipe in AMI_RECIPES:
        assert {"soak_duration", "imagelint_version", "report_bucket"} <= set(declared)
    if recipe is PROVISIONER:
        assert declared["imagelint_version"]["default"]


@pytest.mark.parametrize("recipe", SHIPPED, ids=lambda p: p.name)
def test_every_variable_the_commands_read_is_set(recipe):
    doc = load_template(recipe)
    (build,) = doc["build"]
    blocks = labelled(build.get("provisioner", [])) + labelled(build.get("post-processor", []))
    for chain in build.get("post-processors", []):
        blocks += labelled(chain["post-processor"])
    for _label, body in blocks:
        if "script" in body:
            # a shared script reads exactly what the template sets: nothing from the Packer host's env
            assert script_reads(step_script(recipe, body)) == set(env_names(body)), (recipe, body["script"])
        else:
            used = set(re.findall(r"\$(IMAGELINT_\w+|IMAGELINT)\b", "\n".join(body.get("inline", []))))
            assert used <= set(env_names(body)), (recipe, used - set(env_names(body)))
    for path in template_files(recipe):
        assert "$${" not in path.read_text()  # commands read environment variables, never HCL-escaped shell


@pytest.mark.parametrize("recipe", SHIPPED, ids=lambda p: p.name)
def test_packer_1_6_6_validates_the_template(tmp_path: Path, recipe):
    """From the checkout's root, so that path.root is packer/RECIPE (the scripts must exist there:
    shell-local's validation stats them) and the symlinks are followed."""
    checkout = tmp_path / "checkout with space"
    copy_for_packer_1_6_6(checkout / "packer")
    run = packer(
        "validate",
        "-var",
        "source_ami=ami-03cf127a",
        *(["-var", "report_bucket=b"] if recipe in AMI_RECIPES else []),
        f"packer/{recipe.name}",
        cwd=checkout,
        env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_EC2_METADATA_DISABLED": "true"},
    )
    assert run.returncode == 0, run.output


def test_packer_1_6_6_refuses_an_ami_recipe_whose_shared_script_is_missing(tmp_path: Path):
    """The symlinks are not decoration: without the gate script, validation fails (shell-local stats it)."""
    work = copy_for_packer_1_6_6(tmp_path / "packer")
    (work / "ami-gate" / "imagelint-ami-gate.sh").unlink()
    run = packer(
        "validate", "-var", "source_ami=ami-03cf127a", "-var", "report_bucket=b", ".",
        cwd=work / "ami-gate-delete",
        env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_EC2_METADATA_DISABLED": "true"},
    )  # fmt: skip
    assert run.returncode == 1
    assert "Bad script './imagelint-ami-gate.sh'" in run.output, run.output


def test_ami_gate_is_manifest_then_imagelint_ami():
    (build,) = load_template(AMI_GATE)["build"]
    chain = labelled(build["post-processors"][0]["post-processor"])
    assert [label for label, _ in chain] == [
        "manifest",
        "shell-local",
        "shell-local",
    ]  # manifest, gate, share
    assert chain[0][1]["output"] == "${var.manifest_path}"
    gate = env_names(chain[1][1])
    assert gate["IMAGELINT_MANIFEST"] == "${var.manifest_path}"
    assert gate["IMAGELINT_BUILD_ID"] == "" and gate["IMAGELINT_KEEP_INCONCLUSIVE"] == "false"
    script = step_script(AMI_GATE, chain[1][1]).read_text()
    assert 'target_option="--packer-manifest=$IMAGELINT_MANIFEST"' in script
    assert locals_of(load_template(AMI_GATE))["ami_tags"] == {}


def test_ami_gate_delete_has_imagelint_first_and_no_manifest():
    doc = load_template(AMI_GATE_DELETE)
    (build,) = doc["build"]
    assert "post-processor" not in build  # one chain: the gate first, then the share step
    (chain,) = build["post-processors"]
    steps = labelled(chain["post-processor"])
    assert [label for label, _ in steps] == ["shell-local", "shell-local"]
    gate = env_names(steps[0][1])
    assert gate["IMAGELINT_BUILD_ID"] == "${local.build_id}" and gate["IMAGELINT_MANIFEST"] == ""
    assert gate["IMAGELINT_KEEP_INCONCLUSIVE"] == "${var.keep_inconclusive}"
    assert "IMAGELINT_SHARE_ACCOUNTS" in env_names(steps[1][1])
    assert all('post-processor "manifest"' not in p.read_text() for p in template_files(AMI_GATE_DELETE))
    source = doc["source"][0]["amazon-ebs"]["image"]
    assert source["tags"] == "${merge(local.ami_tags, var.candidate_tags)}"
    assert source["snapshot_tags"] == "${var.candidate_tags}"
    assert locals_of(doc)["ami_tags"] == {"imagelint:build-id": "${local.build_id}"}


@pytest.mark.parametrize("step", [0, 1], ids=["gate", "share"])
def test_both_ami_recipes_run_the_same_script_file(step):
    """Gate and share step: the same `script` attribute, execute_command and environment names in both
    recipes, and the same file (same bytes, packer/ami-gate-delete's through its symlink)."""
    tag, delete = (shell_local_steps(recipe)[step] for recipe in AMI_RECIPES)
    assert tag["script"] == delete["script"] and tag["execute_command"] == delete["execute_command"]
    assert set(env_names(tag)) == set(env_names(delete))
    tag_script, delete_script = step_script(AMI_GATE, tag), step_script(AMI_GATE_DELETE, delete)
    assert delete_script.is_symlink() and not tag_script.is_symlink()
    assert delete_script.resolve() == tag_script.resolve()
    assert delete_script.read_bytes() == tag_script.read_bytes()
    assert tag_script.read_text().startswith("#!/bin/sh\n")
    assert os.access(tag_script, os.X_OK)
    subprocess.run(["dash", "-n", str(tag_script)], check=True)  # POSIX sh syntax


def test_the_ami_recipes_share_variables_and_source_and_declare_the_rest_once():
    """The shared files are the same files; what each recipe has of its own is declared in its own
    file, and no variable or local is declared twice in a recipe."""
    for name in ("variables.pkr.hcl", "source.pkr.hcl"):
        assert (AMI_GATE_DELETE / name).resolve() == (AMI_GATE / name).resolve()
    for recipe in AMI_RECIPES:
        doc = load_template(recipe)
        names = [n for block in doc["variable"] for n in block]
        assert len(names) == len(set(names)), names
        local_names = [n for block in doc["locals"] for n in block]
        assert len(local_names) == len(set(local_names)), local_names
        assert [len(doc["source"]), len(doc["build"]), len(doc["packer"])] == [1, 1, 1]
    assert "manifest_path" in variables(load_template(AMI_GATE))
    assert "manifest_path" not in variables(load_template(AMI_GATE_DELETE))
    assert "keep_inconclusive" in variables(load_template(AMI_GATE_DELETE))
    assert "keep_inconclusive" not in variables(load_template(AMI_GATE))


def test_the_symlinks_resolve_inside_the_repo():
    """Every symlink under packer/ is relative, committed as a symlink, and points at a regular file
    inside packer/ (a copy taken with `cp -rL` or an archive is then whole)."""
    links = sorted(p for p in PACKER_DIR.rglob("*") if p.is_symlink())
    assert [p.relative_to(PACKER_DIR).as_posix() for p in links] == [
        f"ami-gate-delete/{n}" for n in sorted(SHARED)
    ]
    packer_dir = PACKER_DIR.resolve()
    for link in links:
        target = os.readlink(link)
        assert not os.path.isabs(target) and target == f"../ami-gate/{link.name}", (link, target)
        resolved = link.resolve(strict=True)
        assert resolved.is_relative_to(packer_dir) and resolved.is_file() and not resolved.is_symlink()
    for name in SHARED:
        assert _git_mode(f"packer/ami-gate-delete/{name}") == "120000", name  # a symlink in git
    for name in ("imagelint-ami-gate.sh", "imagelint-ami-share.sh"):
        assert _git_mode(f"packer/ami-gate/{name}") == "100755", name  # executable in git


def _git_mode(path: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--stage", "--", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[0] if out else ""


def test_provisioner_gate_collects_with_the_shell_and_judges_on_the_packer_host():
    """No Python on the build instance: the host writes the collector, the instance runs it with sh,
    the bundle comes back, the instance is cleaned, and the host's `imagelint audit BUNDLE` decides."""
    (build,) = load_template(PROVISIONER)["build"]
    steps = labelled(build["provisioner"])
    labels = [label for label, _ in steps]
    assert labels == ["shell-local", "shell", "file", "file", "shell", "file", "shell", "shell-local"]
    collector = 'collector "--config=$IMAGELINT_CONFIG" -- "$IMAGELINT_WORK"'
    assert any(c.endswith(collector) for c in steps[0][1]["inline"])
    assert all(steps[i][1]["generated"] is True for i in (2, 3))  # written by step 1, after validation
    assert any('sh "$IMAGELINT_DIR/collect.sh"' in c for c in steps[4][1]["inline"])
    assert steps[5][1]["direction"] == "download"
    assert steps[6][1]["inline"] == ['rm -rf "$IMAGELINT_DIR"']
    verdict = steps[7][1]["inline"]
    assert any(c.startswith('"$IMAGELINT" audit ') and c.endswith(' -- "$IMAGELINT_BUNDLE"') for c in verdict)
    # nothing on the instance installs or runs Python or pip
    remote = "\n".join(c for label, body in steps if label == "shell" for c in body["inline"])
    assert not re.search(r"python|pip|venv", remote)


def test_chroot_gate_audits_the_mount_path_last():
    doc = load_template(CHROOT)
    assert doc["source"][0]["amazon-chroot"]["image"]["mount_path"] == "${local.mount_path}"
    steps = labelled(doc["build"][0]["provisioner"])
    label, gate = steps[-1]
    assert label == "shell-local"
    assert env_names(gate)["IMAGELINT_ROOT"] == "${local.mount_path}"
    assert 'set -- "$@" -- "$IMAGELINT_ROOT"' in gate["inline"]
