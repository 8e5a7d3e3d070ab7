"""The GitHub Action as a user meets it: its steps run locally, and its YAML checked by real linters.

The composite action's steps run scripts (scripts/github-action-*.sh); these tests run each step's
``run:`` command as action.yml spells it, the way the runner runs a bash step, with the environment
the runner gives it (GITHUB_ACTIONS, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE,
GITHUB_ACTION_PATH) and read back what GitHub would read.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.formats.ci_helpers import (
    SAMPLE_CONFIG,
    SARIF_SCHEMA,
    parse_commands,
    parse_output_file,
    sample_image,
)
from tests.github.steps import audit_inputs, run_step
from tests.support import REPO

BIN = Path(sys.executable).parent
WORKFLOWS = [REPO / ".github/workflows/ci.yml", *sorted((REPO / "examples/workflows").glob("*.yml"))]


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    """A checked-out repository: a config and a Packer template to anchor SARIF to."""
    root = tmp_path / "workspace"
    (root / "packer").mkdir(parents=True)
    (root / "_temp").mkdir()
    (root / "out").mkdir()  # imagelint writes into directories that exist
    shutil.copy(SAMPLE_CONFIG, root / "imagelint.yaml")
    (root / "packer/image.pkr.hcl").write_text('source "null" "img" {}\n')
    return root


def test_action_fails_the_faulty_sample_with_annotations_summary_and_outputs(
    tmp_path: Path, workspace: Path
) -> None:
    image = sample_image(tmp_path / "image")
    inputs = audit_inputs(
        image,
        IMAGELINT_CONFIG="imagelint.yaml",
        IMAGELINT_SARIF="out/imagelint.sarif",
        IMAGELINT_SARIF_ANCHOR="packer/image.pkr.hcl",
        IMAGELINT_FORMATS="junit:out/junit.xml  markdown:out/summary.md",
    )
    proc, summary, outputs = run_step("audit", workspace, inputs)
    assert proc.returncode == 1, proc.stderr  # the gate: the step, and so the job, fails

    commands = parse_commands(proc.stdout)
    errors = [c for c in commands if c["kind"] == "error"]
    # most severe first; the findings that are part of the loop (IL206) are warnings, not errors
    assert [c["title"].split()[0] for c in errors] == [
        *("IL107", "IL206", "IL101", "IL102", "IL104", "IL109", "IL110", "IL204")
    ]
    assert not [c for c in commands if c["kind"] == "notice"]  # 8 errors: all annotated
    assert errors[0]["title"] == "IL107 aws-credentials-file (critical)"
    assert errors[0]["file"] == "packer/image.pkr.hcl" and errors[0]["line"] == "1"
    assert "Remediation: Remove the file" in errors[0]["message"] and "\n" in errors[0]["message"]
    warnings = [c["title"] for c in commands if c["kind"] == "warning"]
    assert sorted(w.split()[0] for w in warnings) == ["IL106", "IL201", "IL202", "IL203", "IL501"]
    assert not any("IL108" in c["title"] for c in commands)  # waived: in the summary, not annotated
    assert "FAIL: 13 finding(s)" in proc.stdout  # the text table is in the log too

    text = summary.read_text()
    assert text.startswith("## imagelint: ❌ FAIL")
    assert "| 8 | 13 | 2 | 0 |" in text  # failing, findings, waived, errors
    assert "Waived findings (2)" in text and "cloud-init clean runs in the AMI-finalize step" in text
    assert text == (workspace / "out/summary.md").read_text()  # one Markdown renderer for both

    report_file = workspace / "imagelint-report.json"
    values = parse_output_file(outputs)
    assert values == {
        "verdict": "fail",
        "failed": "8",
        "findings": "13",
        "exit-code": "1",
        "report-sha256": hashlib.sha256(report_file.read_bytes()).hexdigest(),
        "report-path": "imagelint-report.json",
        "sarif-path": "out/imagelint.sarif",
    }
    assert json.loads(report_file.read_text())["verdict"] == "fail"
    sarif = json.loads((workspace / "out/imagelint.sarif").read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    assert (workspace / "out/junit.xml").read_text().startswith("<?xml")


def test_action_passes_a_cleaned_real_image_without_annotations(clean_rootfs: Path, workspace: Path) -> None:
    proc, summary, outputs = run_step("audit", workspace, audit_inputs(clean_rootfs))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert parse_commands(proc.stdout) == []
    assert summary.read_text().startswith("## imagelint: ✅ PASS")
    values = parse_output_file(outputs)
    assert (values["verdict"], values["failed"], values["exit-code"], values["sarif-path"]) == (
        "pass",
        "0",
        "0",
        "",
    )


def test_action_refuses_bad_input_with_exit_2(tmp_path: Path, workspace: Path) -> None:
    image = sample_image(tmp_path / "image")
    proc, _, outputs = run_step("audit", workspace, audit_inputs(image, IMAGELINT_FAIL_ON="severe"))
    assert proc.returncode == 2 and "--fail-on 'severe'" in proc.stderr
    assert "verdict" not in parse_output_file(outputs)


def test_action_fails_a_failed_mount_as_inconclusive(workspace: Path) -> None:
    """The workflow's mount at $RUNNER_TEMP/rootfs failed: the empty mount point is exit 3, not a pass."""
    mount_point = workspace / "_temp" / "rootfs"
    mount_point.mkdir()
    proc, _, outputs = run_step("audit", workspace, audit_inputs(mount_point))
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert f"{mount_point}: not an operating system's root" in proc.stderr
    assert parse_output_file(outputs).get("verdict") != "pass"
    assert not (workspace / "imagelint-report.json").exists()


# modules a checkout could plant where `python -m` would find them first
PLANTED = ("typer.py", "json.py", "yaml.py", "rich.py", "venv.py", "pip.py", "imagelint/__init__.py")


def plant_modules(workspace: Path) -> Path:
    """Modules in the workspace that record being imported; the file they record in."""
    marker = workspace / "_temp" / "imported-from-the-workspace"
    for name in PLANTED:
        path = workspace / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n")
    (workspace / "imagelint/__main__.py").write_text((workspace / "imagelint/__init__.py").read_text())
    return marker


def test_the_action_imports_nothing_from_the_workspace(tmp_path: Path, workspace: Path) -> None:
    """The audit step, and with a baseline its diff, run in a checkout that plants modules."""
    marker = plant_modules(workspace)
    image = sample_image(tmp_path / "image")
    proc, _, _ = run_step("audit", workspace, audit_inputs(image, IMAGELINT_CONFIG="imagelint.yaml"))
    assert proc.returncode == 1, proc.stderr
    (workspace / "imagelint-report.json").rename(workspace / "previous.json")
    inputs = audit_inputs(image, IMAGELINT_CONFIG="imagelint.yaml", IMAGELINT_BASELINE="previous.json")
    proc, _, outputs = run_step("audit", workspace, inputs)
    assert proc.returncode == 1 and parse_output_file(outputs)["diff-verdict"] == "pass", proc.stderr
    assert not marker.exists(), marker.read_text()


def test_a_failed_run_leaves_no_report_for_the_diff_to_read(tmp_path: Path, workspace: Path) -> None:
    """The previous run's (passing) report and diff are in the workspace; this run cannot read its
    target (exit 3): no report, no diff, no passing diff verdict nor summary."""
    image = sample_image(tmp_path / "image")
    proc, _, _ = run_step("audit", workspace, audit_inputs(image))
    (workspace / "imagelint-report.json").rename(workspace / "previous.json")
    passing = json.dumps({"verdict": "pass"})
    for stale in ("imagelint-report.json", "imagelint-diff.json", "out/imagelint.sarif"):
        (workspace / stale).write_text(passing)
    for target, code in ((tmp_path / "no-such-image", 3), (image, 2)):
        inputs = audit_inputs(
            target,
            IMAGELINT_BASELINE="previous.json",
            IMAGELINT_SARIF="out/imagelint.sarif",
            IMAGELINT_FORMATS="bogus:x" if code == 2 else "",  # refused as the command line is read
        )
        proc, summary, outputs = run_step("audit", workspace, inputs)
        assert proc.returncode == code, proc.stderr
        assert not (workspace / "imagelint-report.json").exists()
        assert not (workspace / "imagelint-diff.json").exists()
        assert not (workspace / "out/imagelint.sarif").exists()
        values = parse_output_file(outputs)
        assert (values["report-path"], values["sarif-path"]) == ("", "")
        assert (values["diff-path"], values["diff-verdict"]) == ("", "")
        assert "PASS" not in summary.read_text()


def test_the_install_step_refuses_a_malformed_extras_input(tmp_path: Path, workspace: Path) -> None:
    venv = tmp_path / "venv"
    inputs = {"IMAGELINT_EXTRAS": "disk]; x", "IMAGELINT_VENV": str(venv), "BOOTSTRAP_PYTHON": sys.executable}
    proc, _, outputs = run_step("install", workspace, inputs)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "extras input" in proc.stderr
    assert not venv.exists() and parse_output_file(outputs) == {}


def _qcow2(tree: Path, out: Path) -> Path:
    """A qcow2 disk image of ``tree``, as a Packer qemu build leaves one (mke2fs -d, qemu-img)."""
    from tests.targets.disk.images import convert

    raw = out.with_suffix(".raw")
    subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(raw), "64M"], check=True)
    convert(raw, out, "qcow2")
    raw.unlink()
    return out


@pytest.mark.slow
def test_action_install_step_with_the_disk_extra_then_audit_a_qcow2(tmp_path: Path, workspace: Path) -> None:
    """Both steps end to end, in a workspace that plants modules: install from the action's own
    checkout with the disk extra into a fresh venv, then gate a qcow2 image."""
    marker = plant_modules(workspace)
    venv = tmp_path / "venv"
    proc, _, outputs = run_step(
        "install",
        workspace,
        {
            "IMAGELINT_VERSION": "",
            "IMAGELINT_EXTRAS": "disk",
            "IMAGELINT_VENV": str(venv),
            "BOOTSTRAP_PYTHON": sys.executable,
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    python = parse_output_file(outputs)["python"]
    assert python == str(venv / "bin/python") and proc.stdout.startswith("imagelint ")
    image = _qcow2(sample_image(tmp_path / "image"), tmp_path / "disk.qcow2")
    inputs = audit_inputs(image, IMAGELINT_PYTHON=python, IMAGELINT_CONFIG="imagelint.yaml")
    proc, summary, outputs = run_step("audit", workspace, inputs)
    assert proc.returncode == 1 and parse_output_file(outputs)["verdict"] == "fail", proc.stderr
    assert len([c for c in parse_commands(proc.stdout) if c["kind"] == "error"]) == 8  # the failing findings
    assert summary.read_text().startswith("## imagelint: ❌ FAIL")
    assert not marker.exists(), marker.read_text()


# --- the YAML, checked by the linters GitHub users run -------------------------------------------


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN))
    assert path, f"{name} is installed with the test extras (pip install -e '.[disk,watch]' --group test)"
    return path


def test_action_and_workflows_match_githubs_schemas() -> None:
    checker = _tool("check-jsonschema")
    action = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-actions", str(REPO / "action.yml")],
        capture_output=True,
        text=True,
    )
    assert action.returncode == 0, action.stdout + action.stderr
    workflows = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
    )
    assert workflows.returncode == 0, workflows.stdout + workflows.stderr


def test_schema_check_catches_a_typo(tmp_path: Path) -> None:
    """The oracle is not blind: a misspelt key in action.yml is refused."""
    broken = tmp_path / "action.yml"
    broken.write_text((REPO / "action.yml").read_text().replace("\nruns:", "\nrun:", 1))
    proc = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(broken)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "'runs' is a required property" in proc.stdout


def _actionlint_repo(tmp_path: Path, workflow_text: str) -> subprocess.CompletedProcess:
    """A repository holding this action at its root and a workflow that uses it as ``./``."""
    repo = tmp_path / "lint-repo"
    (repo / ".github/workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copy(REPO / "action.yml", repo / "action.yml")
    (repo / ".github/workflows/audit.yml").write_text(workflow_text)
    return subprocess.run(
        [_tool("actionlint"), "-format", "{{json .}}"], cwd=repo, capture_output=True, text=True
    )


def test_actionlint_accepts_the_workflows_and_the_example_against_action_yml(tmp_path: Path) -> None:
    proc = subprocess.run([_tool("actionlint"), *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The examples' `with:` inputs and `steps.imagelint.outputs.*` checked against this action.yml
    for name in ("audit-image.yml", "soak-disk-image.yml"):
        example = (REPO / "examples/workflows" / name).read_text()
        assert "uses: imagelint/imagelint@v1" in example
        proc = _actionlint_repo(tmp_path / name, example.replace("uses: imagelint/imagelint@v1", "uses: ./"))
        assert proc.returncode == 0, name + proc.stdout + proc.stderr


AUDITED = [REPO / "action.yml", *WORKFLOWS]


def _zizmor(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("zizmor"), "--offline", "--no-progress", "--format", "plain", *map(str, paths)],
        capture_output=True,
        text=True,
    )


def test_zizmor_finds_nothing_in_the_action_the_workflows_and_the_examples() -> None:
    proc = _zizmor(*AUDITED)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_catches_an_unpinned_action_and_persisted_credentials(tmp_path: Path) -> None:
    """The oracle is not blind: the CI workflow with a tag for a SHA and the default checkout."""
    workflow = (REPO / ".github/workflows/ci.yml").read_text()
    workflow = workflow.replace("persist-credentials: false", "fetch-depth: 1")
    broken = tmp_path / "ci.yml"
    broken.write_text(re.sub(r"actions/setup-python@[0-9a-f]{40}", "actions/setup-python@v6", workflow))
    proc = _zizmor(broken)
    assert proc.returncode != 0
    assert "unpinned-uses" in proc.stdout and "artipacked" in proc.stdout


def test_actionlint_catches_an_undefined_input_and_output(tmp_path: Path) -> None:
    example = (REPO / "examples/workflows/audit-image.yml").read_text()
    broken = example.replace("uses: imagelint/imagelint@v1", "uses: ./")
    broken = broken.replace("sarif-file:", "sarif_file:").replace("outputs.failed", "outputs.failed_count")
    proc = _actionlint_repo(tmp_path, broken)
    messages = [e["message"] for e in json.loads(proc.stdout)]
    assert proc.returncode == 1
    assert any('input "sarif_file" is not defined' in m for m in messages)
    assert any('property "failed_count" is not defined' in m for m in messages)


def test_action_passes_inputs_through_env_never_into_shell() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    steps = action["runs"]["steps"]
    assert action["runs"]["using"] == "composite"
    run_steps = [s for s in steps if "run" in s]
    assert run_steps and all("${{" not in s["run"] and s["shell"] == "bash" for s in run_steps)
    scripts = {s["run"].split("/scripts/")[1].rstrip('"') for s in run_steps}
    assert scripts == {"github-action-install.sh", "github-action-vm-host.sh", "github-action-audit.sh"}
    assert all((REPO / "scripts" / name).is_file() for name in scripts)
    declared = set(action["inputs"])
    assert {"target", "config", "fail-on", "formats", "sarif-file", "version"} <= declared
    assert {"verdict", "failed", "report-path", "sarif-path", "report-sha256"} <= set(action["outputs"])
    for workflow in WORKFLOWS:
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            assert all("${{" not in step.get("run", "") for step in job["steps"]), workflow


def test_action_with_a_baseline_fails_only_on_new_findings_and_summarises_the_diff(
    tmp_path: Path, workspace: Path
) -> None:
    image = sample_image(tmp_path / "image")
    first, _, _ = run_step("audit", workspace, audit_inputs(image, IMAGELINT_CONFIG="imagelint.yaml"))
    assert first.returncode == 1
    previous = workspace / "previous-report.json"
    (workspace / "imagelint-report.json").rename(previous)
    inputs = audit_inputs(
        image,
        IMAGELINT_CONFIG="imagelint.yaml",
        IMAGELINT_BASELINE="previous-report.json",
        IMAGELINT_FAIL_ON_NEW="true",
        IMAGELINT_FAIL_ON_DIFF="true",
        IMAGELINT_DIFF="out/diff.json",
    )
    proc, summary, outputs = run_step("audit", workspace, inputs)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the backlog is the baseline's
    values = parse_output_file(outputs)
    assert values["verdict"] == "pass" and values["diff-verdict"] == "pass"
    assert values["diff-path"] == "out/diff.json"
    assert json.loads((workspace / "out/diff.json").read_text())["changes"] == []
    assert "## imagelint diff: ✅ PASS" in summary.read_text()
    from markdown_it import MarkdownIt  # CommonMark, as GitHub renders the step summary

    # a heading, not text inside the audit summary's closing </details> HTML block
    assert "<h2>imagelint diff: ✅ PASS</h2>" in MarkdownIt("commonmark").render(summary.read_text())

    # the next build enables a new vendor agent: a new finding and a new boot unit
    (image / "usr/lib/systemd/system/vendor.service").write_text(
        "[Service]\nExecStart=/opt/vendor/agent\nRestart=always\n[Install]\nWantedBy=multi-user.target\n"
    )
    (image / "etc/systemd/system/multi-user.target.wants/vendor.service").symlink_to(
        "/usr/lib/systemd/system/vendor.service"
    )
    proc, summary, outputs = run_step("audit", workspace, inputs)
    assert proc.returncode == 1
    values = parse_output_file(outputs)
    assert values["verdict"] == "fail" and values["diff-verdict"] == "fail"
    diff = json.loads((workspace / "out/diff.json").read_text())
    assert ("new-boot-units", "vendor.service") in {(c["kind"], c["subject"]) for c in diff["changes"]}
    report = json.loads((workspace / "imagelint-report.json").read_text())
    assert {f["unit"] for f in report["findings"] if f["baseline_state"] == "new"} == {"vendor.service"}
    assert "<code>vendor.service</code>" in summary.read_text()
