"""The Actions example on a real root-owned image, run as the runner runs it: as a user with sudo.

examples/workflows/audit-image.yml builds the tree with sudo, so it belongs to root (/root, /etc/shadow
and the .ssh directories are root's alone), then audits it with the Action. Here the tree is the real
debootstrapped image, cleaned and copied by root; the Action's audit step runs as an unprivileged
user that has passwordless sudo, as on GitHub-hosted runners, with the example's `with:` inputs.
Without sudo the audit cannot read the image (inconclusive, and says why); with it, it passes, and
the files it wrote are the user's.
"""

from __future__ import annotations

import pwd
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import yaml

from tests.formats.ci_helpers import parse_commands, parse_output_file
from tests.github.steps import run_step
from tests.support import REPO, copy_rootfs, need

EXAMPLE = REPO / "examples/workflows/audit-image.yml"


def _python_for(user_dir: Path) -> str:
    """A Python the user can run with this checkout's imagelint: a venv of Debian's python3 that
    reads the test environment's packages (the test venv's own interpreter lives under /root)."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    need(system is not None, "no /usr/bin/python3")
    version = subprocess.run(
        [str(system), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    need(version == str(sys.version_info[:2]), f"/usr/bin/python3 is {version}, not this Python's version")
    venv = user_dir / "venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "imagelint-test.pth").write_text(f"{REPO}\n{sysconfig.get_paths()['purelib']}\n")
    subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
    return str(venv / "bin/python")


def _example_inputs(target: Path, python: str, **override: str) -> dict[str, str]:
    """The audit step's env: block as action.yml maps the example's `with:` inputs (defaults for the rest)."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    (step,) = [s for s in action["runs"]["steps"] if s.get("id") == "audit"]
    job = yaml.safe_load(EXAMPLE.read_text())["jobs"]["audit"]
    (use,) = [s for s in job["steps"] if s.get("id") == "imagelint"]
    given = {**use["with"], "target": str(target), **override}
    env = {"IMAGELINT_PYTHON": python}
    for name, expression in step["env"].items():
        if expression.startswith("${{ inputs."):
            key = expression.removeprefix("${{ inputs.").removesuffix(" }}")
            value = given.get(key, action["inputs"][key].get("default", ""))
            env[name] = str(value).lower() if isinstance(value, bool) else str(value)  # as GitHub renders
    return env


def test_the_example_passes_a_root_built_image_as_a_user_with_sudo(
    runner_user: str, shared_dir: Path, clean_rootfs: Path
) -> None:
    # "sudo ./build-image.sh $RUNNER_TEMP/rootfs": a real image, built (copied) by root
    rootfs = copy_rootfs(clean_rootfs, shared_dir / "rootfs")
    assert (rootfs / "root").stat().st_uid == 0 and (rootfs / "root").stat().st_mode & 0o077 == 0
    python = _python_for(shared_dir)
    workspace = shared_dir / "workspace"
    for sub in ("_temp", "packer"):
        (workspace / sub).mkdir(parents=True)
    (workspace / ".imagelint.yaml").write_text("version: 1\n")
    (workspace / "packer/image.pkr.hcl").write_text('source "null" "img" {}\n')
    subprocess.run(["chown", "-R", f"{runner_user}:{runner_user}", str(workspace)], check=True)
    uid = pwd.getpwnam(runner_user).pw_uid

    # as the runner user without sudo: the image cannot be read in full, and the audit says why
    inputs = _example_inputs(rootfs, python, sudo="false")
    proc, _, outputs = run_step("audit", workspace, inputs, user=runner_user)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr
    assert parse_output_file(outputs)["verdict"] == "inconclusive"
    assert "/etc/shadow: cannot open: permission denied: run as root or with sudo" in proc.stdout
    assert "damaged" not in proc.stdout + proc.stderr

    # the example as shipped (sudo: true), then sudo: auto (the default): root reads it, it passes
    for sudo in (None, "auto"):
        inputs = _example_inputs(rootfs, python, **({"sudo": sudo} if sudo else {}))
        assert inputs["IMAGELINT_SUDO"] == (sudo or "true")
        proc, summary, outputs = run_step("audit", workspace, inputs, user=runner_user)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        assert parse_commands(proc.stdout) == []
        assert summary.read_text().startswith("## imagelint: ✅ PASS")
        values = parse_output_file(outputs)
        assert (values["verdict"], values["exit-code"]) == ("pass", "0")
        assert values["sarif-path"] == "imagelint.sarif" and values["report-path"] == "imagelint-report.json"
        for name in ("imagelint-report.json", "imagelint.sarif", "imagelint-junit.xml"):
            assert (workspace / name).stat().st_uid == uid, name  # the user's, for upload and the next run

    # a baseline: the diff runs as the user and reads the report root wrote
    (workspace / "imagelint-report.json").rename(workspace / "previous.json")
    inputs = _example_inputs(rootfs, python, baseline="previous.json", **{"fail-on-diff": "true"})
    proc, summary, outputs = run_step("audit", workspace, inputs, user=runner_user)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert parse_output_file(outputs)["diff-verdict"] == "pass"
    assert "## imagelint diff: ✅ PASS" in summary.read_text()
    assert (workspace / "imagelint-diff.json").stat().st_uid == uid


def test_sudo_true_without_sudo_is_refused(plain_user: str, shared_dir: Path) -> None:
    """sudo: true for a user sudo does not let run as root: exit 2 with one line, nothing audited."""
    need(shutil.which("sudo") is not None, "sudo is not installed (scripts/install.sh --test installs it)")
    workspace = shared_dir / "workspace"
    (workspace / "_temp").mkdir(parents=True)
    subprocess.run(["chown", "-R", f"{plain_user}:{plain_user}", str(workspace)], check=True)
    inputs = _example_inputs(shared_dir, "python3", sudo="true")
    proc, _, outputs = run_step("audit", workspace, inputs, user=plain_user)
    assert proc.returncode == 2 and "sudo input is true" in proc.stderr, proc.stderr
    assert "verdict" not in parse_output_file(outputs)
