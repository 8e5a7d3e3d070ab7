"""No value of a Packer recipe reaches a command line as an option.

Each option-like value is fed to every environment variable of each recipe's imagelint steps (the
template's variables and locals, as the step's ``environment_vars`` name them), and the step's commands
run as shipped: the inline ones with sh as shell-local runs them, the AMI gate's script under dash with
the real imagelint against moto. The image they read is the faulty sample (it fails when read). A value
is refused (exit 2), read as the path it names (exit 3: no such image), or taken as an option's own
argument (the image is read and fails); never a pass. Then a real ``packer build`` (null builder) runs
the chroot and qemu gates' shipped commands with each value as the image.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.formats.ci_helpers import sample_image
from tests.packer.helpers import (
    AMI_GATE,
    CHROOT,
    PROVISIONER,
    QEMU,
    VENV_BIN,
    build,
    env_names,
    gate_env,
    hcl_list,
    labelled,
    load_template,
    packer_env,
    run_script,
    shell_local_steps,
    step_script,
)

OPTION_LIKE = ["-h", "--ignore=*", "--no-builtin-rules", "--config=/dev/null"]
IMAGELINT = str(VENV_BIN / "imagelint")


def _gate_steps() -> dict[str, dict[str, Any]]:
    """The inline imagelint steps of the recipes, by name: the last provisioner of the chroot recipe,
    the first post-processor of the qemu recipe and its second (the soak: `vm check`), the first and
    last provisioner of the provisioner recipe (both run on the Packer host)."""
    chroot = labelled(load_template(CHROOT)["build"][0]["provisioner"])[-1][1]
    qemu = labelled(load_template(QEMU)["build"][0]["post-processors"][0]["post-processor"])
    provisioner = labelled(load_template(PROVISIONER)["build"][0]["provisioner"])
    return {
        "chroot": chroot,
        "qemu": qemu[0][1],
        "qemu-soak": qemu[1][1],
        "collector": provisioner[0][1],
        "verdict": provisioner[-1][1],
    }


STEPS = _gate_steps()
# the variables naming what a step reads or writes as its positional argument
TARGETS = {"IMAGELINT_ROOT", "IMAGELINT_IMAGE", "IMAGELINT_BUNDLE", "IMAGELINT_WORK"}


def _defaults(image: Path, work: Path) -> dict[str, str]:
    """A working value for every variable the steps read: the gates read the sample image."""
    return {
        "IMAGELINT": IMAGELINT,
        "IMAGELINT_ROOT": str(image),
        "IMAGELINT_IMAGE": str(image),
        "IMAGELINT_BUNDLE": str(image),  # a bundle or a tree: the verdict step's audit reads either
        "IMAGELINT_WORK": str(work / "collector"),
        "IMAGELINT_VERSION": "",
        "IMAGELINT_FAIL_ON": "medium",
        "IMAGELINT_CONFIG": str(PROVISIONER / "imagelint.yaml"),  # the provisioner recipe's default
        "IMAGELINT_REPORT": str(work / "report.json"),
        "IMAGELINT_BASELINE": "",
        "IMAGELINT_FAIL_ON_NEW": "false",
        "IMAGELINT_SOAK": "10m",  # the soak step runs (vm check refuses a tree: nothing boots)
        "IMAGELINT_FIRMWARE": "bios",
    }


def _run_inline(body: dict[str, Any], values: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "step.sh"
    script.write_text("\n".join(body["inline"]) + "\n", encoding="utf-8")
    env = packer_env({name: values[name] for name in env_names(body)})
    return subprocess.run(["sh", "-e", str(script)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


CASES = [(step, name) for step, body in STEPS.items() for name in sorted(env_names(body))]


@pytest.mark.parametrize(("step", "name"), CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_an_option_like_value_in_a_gate_variable_never_passes(tmp_path: Path, step: str, name: str) -> None:
    image = sample_image(tmp_path / "image")
    for index, value in enumerate(OPTION_LIKE):
        work = tmp_path / f"run{index}"
        work.mkdir()
        values = {**_defaults(image, work), name: value}
        if name == "IMAGELINT_FAIL_ON_NEW":  # it counts only with a baseline
            values["IMAGELINT_BASELINE"] = str(_baseline(image, tmp_path))
        proc = _run_inline(STEPS[step], values, work)
        seen = f"{step} {name}={value}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr}"
        report = work / "report.json"
        if report.exists():
            assert json.loads(report.read_text())["verdict"] != "pass", seen
        assert "\nPASS" not in proc.stdout, seen
        if name == "IMAGELINT":  # the command itself: not found, never an option of sh
            assert proc.returncode == 127, seen
        elif step == "collector":  # writes the collector, no verdict: into the directory named, or refused
            assert proc.returncode in (0, 2), seen
            if proc.returncode == 0:
                assert name == "IMAGELINT_WORK" and (work / value / "collect.sh").is_file(), seen
        elif name in TARGETS:
            missing = "no such file" if step == "qemu-soak" else "image root does not exist"
            assert proc.returncode == 3 and f"{value}: {missing}" in proc.stdout + proc.stderr, seen
        else:
            assert proc.returncode in (1, 2, 3), seen


def _baseline(image: Path, tmp_path: Path) -> Path:
    """A report of a clean tree: every finding of the sample image is new against it."""
    path = tmp_path / "baseline.json"
    if not path.exists():
        clean = tmp_path / "clean"
        for name in ("etc", "usr/bin", "usr/lib/systemd"):
            (clean / name).mkdir(parents=True, exist_ok=True)
        (clean / "etc/os-release").write_text("ID=debian\n")
        (clean / "usr/lib/systemd/systemd").write_text("")
        subprocess.run([IMAGELINT, "audit", "-f", f"json:{path}", "--", str(clean)], env=packer_env(),
                       capture_output=True, check=False)  # fmt: skip
    return path


def test_every_step_reads_its_values_from_the_environment_only() -> None:
    """The cases above cover every variable: no value is spliced into a step's commands by Packer."""
    for body in STEPS.values():
        assert "${" not in "\n".join(body["inline"])
    assert {name for _, name in CASES} >= TARGETS | {"IMAGELINT_CONFIG", "IMAGELINT_FAIL_ON"}


# --- the AMI recipes' gate script, against moto ---------------------------------------------------

# read by the launch gate only: the offline gate is off for them
LAUNCH_ONLY = {"IMAGELINT_SOAK_DURATION", "IMAGELINT_INSTANCE_PROFILE", "IMAGELINT_REPORT_BUCKET"}
# options on purpose (the template's extra_args); the AWS CLI's name; the build id goes into a filter
NOT_ARGUMENTS = {"IMAGELINT_EXTRA_ARGS", "IMAGELINT_BUILD_ID", "IMAGELINT_KEEP_INCONCLUSIVE"}
AMI_NAMES = sorted(set(env_names(shell_local_steps(AMI_GATE)[0])) - NOT_ARGUMENTS)


def test_the_ami_gate_names_are_those_the_template_sets() -> None:
    assert set(AMI_NAMES) | NOT_ARGUMENTS == set(gate_env())


@pytest.mark.parametrize("name", AMI_NAMES)
def test_an_option_like_value_in_an_ami_gate_variable_never_passes(tmp_path: Path, name: str) -> None:
    from tests.aws.moto_env import MotoEnv

    gate = shell_local_steps(AMI_GATE)[0]
    image = sample_image(tmp_path / "image")
    run_uuid = str(uuid.uuid4())
    with MotoEnv() as aws:
        aws.agent.rootfs = image
        aws.agent.online = False  # the launch gate ends inconclusive (exit 3) at once
        manifest = tmp_path / "packer-manifest.json"
        built = {"name": "image", "artifact_id": f"us-east-1:{aws.image_id}", "packer_run_uuid": run_uuid}
        manifest.write_text(json.dumps({"builds": [built], "last_run_uuid": run_uuid}))
        for value in OPTION_LIKE:
            values = gate_env(
                IMAGELINT_MANIFEST=str(manifest),
                IMAGELINT_REPORT_BUCKET=aws.bucket,
                IMAGELINT_INSTANCE_PROFILE=aws.profile,
                IMAGELINT_EXTRA_ARGS="--poll 0.2s --ssm-timeout 1s",
                IMAGELINT_OFFLINE_MODE="none" if name in LAUNCH_ONLY else "snapshot",
            )
            values[name] = value
            env = {**packer_env(aws.env), "PACKER_RUN_UUID": run_uuid, **values}
            proc = run_script(step_script(AMI_GATE, gate), env, cwd=tmp_path)
            seen = f"{name}={value}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            assert proc.returncode in ((127,) if name == "IMAGELINT" else (2, 3)), seen
            tags = aws.client("ec2").describe_images(ImageIds=[aws.image_id])["Images"][0].get("Tags", [])
            assert {"Key": "imagelint:verdict", "Value": "pass"} not in tags, seen


# --- a real packer build of the shipped gate commands ---------------------------------------------


def _null_template(body: dict[str, Any], target: str) -> str:
    """A null build whose one shell-local post-processor is the shipped step: its inline commands as
    shipped, its environment_vars with each value from a variable (the target from ``image``)."""
    env = {**_defaults(Path("."), Path(".")), "IMAGELINT": IMAGELINT, "IMAGELINT_REPORT": "report.json"}
    env["IMAGELINT_" + target.removeprefix("IMAGELINT_")] = "${var.image}"
    env_vars = [f"{name}={env[name]}" for name in env_names(body)]
    quoted = ",\n    ".join(json.dumps(item) for item in env_vars)
    return (
        'variable "image" {\n  type = string\n}\n\n'
        'source "null" "image" {\n  communicator = "none"\n}\n\n'
        'build {\n  sources = ["source.null.image"]\n\n'
        '  post-processor "shell-local" {\n'
        f"    environment_vars = [\n    {quoted}\n  ]\n"
        f"    inline = {hcl_list(body['inline'])}\n"
        "  }\n}\n"
    )


@pytest.mark.parametrize(("step", "target"), [("chroot", "IMAGELINT_ROOT"), ("qemu", "IMAGELINT_IMAGE")])
def test_packer_builds_fail_on_an_option_like_image(tmp_path: Path, step: str, target: str) -> None:
    work = tmp_path / "build"
    work.mkdir()
    (work / "gate.pkr.hcl").write_text(_null_template(STEPS[step], target))
    image = sample_image(tmp_path / "image")
    control = build(work, "-var", f"image={image}")
    assert control.returncode != 0 and "non-zero exit status: 1" in control.output, control.output
    for value in OPTION_LIKE:
        run = build(work, "-var", f"image={value}")
        assert run.returncode != 0, run.output
        assert "non-zero exit status: 3" in run.output and f"{value}: image root does not exist" in run.output
