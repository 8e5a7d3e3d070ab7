"""The Action's composite steps run locally, as the runner runs them (shared by the tests of tests/github)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support import REPO


def step_command(step_id: str) -> str:
    """The ``run:`` command of the step ``step_id`` in action.yml."""
    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    (step,) = [s for s in steps if s.get("id") == step_id]
    assert step["shell"] == "bash"
    return str(step["run"])


def run_step(
    step_id: str, workspace: Path, inputs: dict[str, str], *, user: str | None = None
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """One composite step (``install`` or ``audit``), as the runner runs a ``shell: bash`` step: its
    command in a file given to ``bash --noprofile --norc -eo pipefail``, in the workspace, with the
    runner's environment (its PATH, HOME and pip configuration) plus the step's env: block. With
    ``user``, run as that user (``runuser``), who then owns the summary and output files, as the
    runner's user does."""
    summary, outputs = workspace / "step-summary.md", workspace / "github-output"
    summary.write_text("")
    outputs.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "NO_COLOR": "1",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(REPO),
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(workspace / "_temp"),
        # the runner's pip configuration, as a job's env: gives it (an offline machine's wheelhouse)
        **{key: value for key, value in os.environ.items() if key.startswith("PIP_")},
        **inputs,
    }
    script = workspace / "_temp" / f"step-{step_id}.sh"
    script.write_text(step_command(step_id) + "\n")
    command = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    if user is not None:
        for path in (summary, outputs, script):
            shutil.chown(path, user, user)
        env["HOME"] = os.path.expanduser(f"~{user}")
        command = ["runuser", "-u", user, "--", *command]
    proc = subprocess.run(
        command,
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc, summary, outputs


def audit_inputs(target: Path, **extra: str) -> dict[str, str]:
    """The audit step's env: block in action.yml, with the action's defaults."""
    return {
        "IMAGELINT_PYTHON": sys.executable,
        "IMAGELINT_TARGET": str(target),
        "IMAGELINT_CONFIG": "",
        "IMAGELINT_FAIL_ON": "",
        "IMAGELINT_FORMATS": "",
        "IMAGELINT_REPORT": "imagelint-report.json",
        "IMAGELINT_SARIF": "",
        "IMAGELINT_SARIF_ANCHOR": "",
        **extra,
    }
