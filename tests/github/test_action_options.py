"""No input of the Action reaches a command line as an option.

Each option-like value (a matrix entry, a step output, a branch or file name) is fed to every input of
the audit step and of the install step, run as the runner runs them, against the faulty sample image
(it fails when read). A value is refused (exit 2), read as the path it names (the target: exit 3, there
is no such image), or taken as an option's own argument (the image is audited and fails); never a pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.formats.ci_helpers import SAMPLE_CONFIG, parse_output_file, sample_image
from tests.github.steps import audit_inputs, run_step
from tests.support import REPO

OPTION_LIKE = ["-h", "--ignore=*", "--no-builtin-rules", "--config=/dev/null"]


def _step_env(step_id: str) -> dict[str, str]:
    """The env: block of a step of action.yml: variable -> the input it carries."""
    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    (step,) = [s for s in steps if s.get("id") == step_id]
    env: dict[str, str] = step["env"]
    return {name: value.removeprefix("${{ inputs.").removesuffix(" }}") for name, value in env.items()}


AUDIT_INPUTS = sorted(name for name, value in _step_env("audit").items() if not value.startswith("${{"))
# with a baseline (a report of the same image), so that the diff's inputs are used
DIFF_INPUTS = {"IMAGELINT_DIFF", "IMAGELINT_FAIL_ON_NEW", "IMAGELINT_FAIL_ON_DIFF"}


def test_every_input_of_the_audit_step_is_covered() -> None:
    """The parametrisation follows action.yml: an input added there is fed option-like values too."""
    inputs = yaml.safe_load((REPO / "action.yml").read_text())["inputs"]
    carried = set(_step_env("audit").values()) | set(_step_env("install").values())
    assert set(inputs) - carried == {"python-version", "setup-python"}  # actions/setup-python's own
    assert "IMAGELINT_TARGET" in AUDIT_INPUTS and "IMAGELINT_SUDO" in AUDIT_INPUTS
    assert "IMAGELINT_PYTHON" not in AUDIT_INPUTS  # the install step's output, not an input


@pytest.mark.parametrize("name", AUDIT_INPUTS)
def test_an_option_like_value_in_an_audit_input_never_passes(tmp_path: Path, name: str) -> None:
    image = sample_image(tmp_path / "image")
    workspace = tmp_path / "workspace"
    (workspace / "_temp").mkdir(parents=True)
    (workspace / "imagelint.yaml").write_text(SAMPLE_CONFIG.read_text())
    context: dict[str, str] = {"IMAGELINT_CONFIG": "imagelint.yaml"}
    if name in DIFF_INPUTS:
        first, _, _ = run_step("audit", workspace, audit_inputs(image, **context))
        assert first.returncode == 1, first.stderr
        (workspace / "imagelint-report.json").rename(workspace / "previous.json")
        context["IMAGELINT_BASELINE"] = "previous.json"
    for value in OPTION_LIKE:
        proc, summary, outputs = run_step("audit", workspace, audit_inputs(image, **{**context, name: value}))
        values = parse_output_file(outputs)
        seen = f"{name}={value}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr}"
        assert proc.returncode in (1, 2, 3), seen
        assert values.get("verdict") != "pass" and "## imagelint: ✅ PASS" not in summary.read_text(), seen
        if name == "IMAGELINT_TARGET":
            assert proc.returncode == 2 and "starts with '-'" in proc.stderr, seen  # refused, not audited
        if proc.returncode == 1:  # the image was read: the sample's findings, not another tree's
            assert values["verdict"] == "fail" and values["failed"] == "8", seen
        if name in DIFF_INPUTS and proc.returncode == 1:
            assert values["diff-verdict"] in ("pass", "fail"), seen  # the diff ran on the named reports


def test_a_target_named_like_an_option_is_audited_as_a_path_when_written_as_one(tmp_path: Path) -> None:
    """The refusal names the way out: ./-h is the directory -h, audited (here: it does not exist)."""
    workspace = tmp_path / "workspace"
    (workspace / "_temp").mkdir(parents=True)
    proc, _, outputs = run_step("audit", workspace, audit_inputs(Path(), IMAGELINT_TARGET="./--ignore=*"))
    assert proc.returncode == 3 and "./--ignore=*: image root does not exist" in proc.stderr, proc.stderr
    assert parse_output_file(outputs).get("verdict") != "pass"


@pytest.mark.parametrize("name", ["IMAGELINT_VERSION", "IMAGELINT_EXTRAS"])
def test_an_option_like_value_in_an_install_input_installs_nothing(tmp_path: Path, name: str) -> None:
    """The install step: refused (extras: exit 2, before any environment is made) or a requirement pip
    cannot parse (version), never an option given to pip; no python output for the audit step."""
    workspace = tmp_path / "workspace"
    (workspace / "_temp").mkdir(parents=True)
    for index, value in enumerate(OPTION_LIKE):
        venv = tmp_path / f"venv{index}"
        inputs = {
            "IMAGELINT_VERSION": "",
            "IMAGELINT_EXTRAS": "",
            "IMAGELINT_VENV": str(venv),
            "BOOTSTRAP_PYTHON": sys.executable,
            name: value,
        }
        proc, _, outputs = run_step("install", workspace, inputs)
        seen = f"{name}={value}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert proc.returncode != 0 and parse_output_file(outputs) == {}, seen
        if name == "IMAGELINT_EXTRAS":
            assert proc.returncode == 2 and "extras input" in proc.stderr and not venv.exists(), seen
        else:
            assert "Invalid requirement" in proc.stderr or "ERROR" in proc.stderr, seen
