"""The provisioner recipe's commands, run for real in their order with sh: the Packer host's steps
here, the build instance's steps on a directory standing in for the instance (the collector reads the
faulty sample tree through its plan's ``root`` directive, as the AMI tests' stand-in agent does, and
without ``systemctl show``: this machine is not the image). Packer moves the files between them
(`file` upload and download), which the test does by copying. Packer 1.6.6 validates the template
itself in test_shipped_templates.py; what it cannot run without an EC2 instance runs here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.packer.helpers import PROVISIONER, VENV_BIN, env_names, labelled, load_template, packer_env


def _run(body: dict, values: dict[str, str], tmp_path: Path, name: str) -> subprocess.CompletedProcess[str]:
    """One step's inline commands as the script Packer makes of them, with its environment_vars
    (their HCL expressions replaced by ``values``)."""
    env = {key: values[key] for key in env_names(body)}
    script = tmp_path / f"{name}.sh"
    script.write_text("\n".join(body["inline"]) + "\n", encoding="utf-8")
    return subprocess.run(
        ["sh", "-eu", str(script)],
        env=packer_env(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_instance_needs_only_sh_and_the_host_decides(tmp_path: Path, sample_image: Path) -> None:
    (build,) = load_template(PROVISIONER)["build"]
    steps = labelled(build["provisioner"])
    host, instance = tmp_path / "host", tmp_path / "instance"
    host.mkdir()
    values = {
        "IMAGELINT": str(VENV_BIN / "imagelint"),
        "IMAGELINT_VERSION": "",
        "IMAGELINT_CONFIG": str(PROVISIONER / "imagelint.yaml"),
        "IMAGELINT_WORK": str(host / "imagelint-gate"),
        "IMAGELINT_DIR": str(instance / "var-tmp-imagelint-gate"),
        "IMAGELINT_BUNDLE": str(host / "imagelint-gate" / "bundle"),
        "IMAGELINT_FAIL_ON": "medium",
        "IMAGELINT_REPORT": str(host / "imagelint-report.json"),
    }
    remote = Path(values["IMAGELINT_DIR"])
    for index, (label, body) in enumerate(steps):
        if label == "file" and body.get("direction") == "download":
            shutil.copyfile(remote / "bundle", values["IMAGELINT_BUNDLE"])
            continue
        if label == "file":  # upload: the collector and its plan, from the host's work directory
            name = Path(body["source"]).name
            shutil.copyfile(Path(values["IMAGELINT_WORK"]) / name, remote / name)
            if name == "plan.txt":  # the stand-in instance: the sample tree, no systemctl show
                with (remote / name).open("a", encoding="utf-8") as plan:
                    plan.write(f"root {sample_image}\nshow 0\n")
            continue
        proc = _run(body, values, tmp_path, f"step{index}")
        if index < len(steps) - 1:
            assert proc.returncode == 0, (label, proc.stdout, proc.stderr)
    # the instance kept nothing; the host's audit of the bundle failed the build with the findings
    assert not remote.exists()
    assert proc.returncode == 1, proc.stderr
    report = json.loads(Path(values["IMAGELINT_REPORT"]).read_text(encoding="utf-8"))
    assert report["verdict"] == "fail"
    failing = {f["rule_id"] for f in report["findings"] if f["failing"]}
    assert {"IL206", "IL108"} <= failing, failing  # the ecs loop (IL203 is part of it), cloud-init
    # the same findings as an audit of the tree itself with the same config
    direct = tmp_path / "direct.json"
    subprocess.run(
        [str(VENV_BIN / "imagelint"), "audit", str(sample_image), "--config", values["IMAGELINT_CONFIG"],
         "-f", f"json:{direct}"],
        capture_output=True, text=True, timeout=300, check=False, env=packer_env(),
    )  # fmt: skip
    expected = json.loads(direct.read_text(encoding="utf-8"))
    assert failing == {f["rule_id"] for f in expected["findings"] if f["failing"]}


def test_a_version_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    (build,) = load_template(PROVISIONER)["build"]
    label, body = labelled(build["provisioner"])[0]
    values = {
        "IMAGELINT": str(VENV_BIN / "imagelint"),
        "IMAGELINT_VERSION": "0.0.0-not-this",
        "IMAGELINT_CONFIG": str(PROVISIONER / "imagelint.yaml"),
        "IMAGELINT_WORK": str(tmp_path / "work"),
    }
    proc = _run(body, values, tmp_path, "version")
    assert label == "shell-local" and proc.returncode == 2
    assert "is not imagelint 0.0.0-not-this" in proc.stderr and not (tmp_path / "work").exists()
