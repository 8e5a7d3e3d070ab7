"""The Action's soak mode: the vm-host step readies the runner, the audit step runs `imagelint vm check`.

The steps run as the runner runs them (tests/github/steps.py). The vm-host step is run for real: as
root with every tool present (nothing installed, KVM as /dev/kvm allows), as a user without sudo
whose PATH lacks a tool (refused, naming the package), and as a user with sudo facing a /dev/kvm it
cannot open (GitHub's udev rule written, here to a scratch path: the TCG fallback when udev does not
apply it). The audit step's soak mode is checked up to the command line it gives `vm check` (its
refusals come from vm check itself, before any boot), and once end to end: the crashloop test image
booted and soaked through the step (serial: a whole VM for minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from tests.formats.ci_helpers import SARIF_SCHEMA, parse_commands, parse_output_file
from tests.github.steps import audit_inputs, run_step
from tests.support import need

# GitHub's documented rule for the runner user's /dev/kvm (the Android emulator's KVM setup)
KVM_RULE = 'KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"\n'
TOOLS = ("qemu-system-x86_64", "qemu-img", "genisoimage", "ssh", "ssh-keygen")


def _workspace(root: Path, owner: str | None = None) -> Path:
    workspace = root / "workspace"
    (workspace / "_temp").mkdir(parents=True)
    if owner is not None:
        subprocess.run(["chown", "-R", f"{owner}:{owner}", str(workspace)], check=True)
    return workspace


def _path_without(directory: Path, *left_out: str) -> str:
    """A PATH of one directory holding links to the commands the step uses, but for ``left_out``."""
    directory.mkdir()
    wanted = ("runuser", "bash", "env", "id", "sudo", "tee", "udevadm", *TOOLS)
    for name in wanted:
        found = shutil.which(name)
        if found and name not in left_out:
            (directory / name).symlink_to(found)
    directory.chmod(0o755)
    return str(directory)


def _need_every_vm_host_tool() -> None:
    for tool in TOOLS:
        need(shutil.which(tool) is not None, f"{tool} is not installed (scripts/install.sh --test)")
    need(Path("/usr/share/ovmf/OVMF.fd").is_file(), "ovmf is not installed (scripts/install.sh --test)")


def test_the_vm_host_step_as_root_installs_nothing_when_every_tool_is_there(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "the step as the root runner needs root")
    _need_every_vm_host_tool()
    rules = tmp_path / "99-kvm4all.rules"
    inputs = {"IMAGELINT_UDEV_RULES": str(rules)}
    proc, _, outputs = run_step("vm-host", _workspace(tmp_path), inputs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "are installed" in proc.stdout and "installing" not in proc.stdout
    kvm = os.path.exists("/dev/kvm")  # root opens it when it is there
    assert parse_output_file(outputs) == {"kvm": "true" if kvm else "false"}
    assert not rules.exists()  # root needs no rule


def test_the_vm_host_step_names_the_missing_package_when_it_cannot_install(
    plain_user: str, shared_dir: Path
) -> None:
    _need_every_vm_host_tool()  # but the one left out: the message names exactly what is missing
    path = _path_without(shared_dir / "bin", "genisoimage")
    proc, _, outputs = run_step(
        "vm-host", _workspace(shared_dir, plain_user), {"PATH": path}, user=plain_user
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "soak mode needs genisoimage" in proc.stderr, proc.stderr
    assert parse_output_file(outputs) == {}


def test_the_vm_host_step_writes_githubs_udev_rule_and_falls_back_to_tcg(
    runner_user: str, shared_dir: Path
) -> None:
    """/dev/kvm here is not the user's; the rule goes (through sudo) to a scratch path, so udev never
    applies it: the step still succeeds, and says the boot runs under TCG."""
    device = Path("/dev/kvm")
    need(device.is_char_device(), "no /dev/kvm on this machine")
    probe = subprocess.run(["runuser", "-u", runner_user, "--", "test", "-w", str(device)], check=False)
    need(probe.returncode != 0, f"/dev/kvm is already open to {runner_user}")
    rules = shared_dir / "rules" / "99-kvm4all.rules"
    rules.parent.mkdir()
    inputs = {"IMAGELINT_UDEV_RULES": str(rules), "IMAGELINT_KVM_DEVICE": str(device)}
    proc, _, outputs = run_step("vm-host", _workspace(shared_dir, runner_user), inputs, user=runner_user)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rules.read_text() == KVM_RULE and rules.stat().st_uid == 0  # written as root, GitHub's text
    assert "installing the udev rule" in proc.stdout
    (notice,) = [c for c in parse_commands(proc.stdout) if c["kind"] == "notice"]
    assert "TCG" in notice["message"] and notice["title"] == "imagelint vm"
    assert parse_output_file(outputs) == {"kvm": "false"}


# --- the audit step in soak mode, up to vm check's command line (no boot) -----------------------


@pytest.fixture()
def blank_disk(tmp_path: Path) -> Path:
    need(shutil.which("qemu-img") is not None, "qemu-img is not installed (Debian: qemu-utils)")
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    return disk


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"IMAGELINT_SOAK": "forever"}, "--soak"),
        ({"IMAGELINT_SOAK": "10m", "IMAGELINT_VM_FIRMWARE": "efi"}, "--firmware 'efi': auto, bios or uefi"),
        ({"IMAGELINT_SOAK": "10m", "IMAGELINT_BASELINE": "previous.json"}, "baseline input is not supported"),
        ({"IMAGELINT_SOAK": "10m", "IMAGELINT_SUDO": "true"}, "never as root"),
        ({"IMAGELINT_SOAK": "10m", "IMAGELINT_SUDO": "sometimes"}, "the sudo input"),
    ],
)
def test_soak_mode_refuses_bad_input_before_any_boot(
    tmp_path: Path, blank_disk: Path, extra: dict[str, str], said: str
) -> None:
    """The soak and firmware values reach `vm check` as its options' own arguments (its refusals,
    exit 2); what soak mode does not take is refused by the step. Nothing boots, no report."""
    workspace = _workspace(tmp_path)
    proc, summary, outputs = run_step("audit", workspace, audit_inputs(blank_disk, **extra))
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "vm: booting" not in proc.stderr
    assert not (workspace / "imagelint-report.json").exists()
    assert "verdict" not in parse_output_file(outputs) and summary.read_text() == ""


def test_soak_mode_runs_vm_check_on_the_target_not_an_audit(tmp_path: Path) -> None:
    """A directory is what the offline audit takes; soak mode's vm check takes a disk image file only."""
    root = tmp_path / "rootfs"
    root.mkdir()
    proc, _, outputs = run_step("audit", _workspace(tmp_path), audit_inputs(root, IMAGELINT_SOAK="0"))
    assert proc.returncode == 2 and "is a directory" in proc.stderr, proc.stderr
    assert "verdict" not in parse_output_file(outputs)


# --- one real boot through the step ---------------------------------------------------------------


@pytest.mark.serial  # a whole VM for minutes
@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
def test_soak_mode_boots_the_crashloop_image_and_fails_the_job_on_the_leak(tmp_path: Path) -> None:
    from tests.vm.conftest import need_qemu, vm_image
    from tests.vm.processes import qemu_pids

    need_qemu()
    image = vm_image("crashloop")
    workspace = _workspace(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    inputs = audit_inputs(
        image, IMAGELINT_SOAK="60s", IMAGELINT_SARIF="out/imagelint.sarif", TMPDIR=str(scratch)
    )
    proc, summary, outputs = run_step("audit", workspace, inputs)
    seen = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 1, seen  # the gate: the job fails
    values = parse_output_file(outputs)
    assert (values["verdict"], values["exit-code"]) == ("fail", "1"), values
    assert values["report-path"] == "imagelint-report.json" and values["sarif-path"] == "out/imagelint.sarif"
    report = json.loads((workspace / "imagelint-report.json").read_text())
    assert report["target"]["kind"] == "vm" and report["facts"]["vm"]["accelerator"] in ("kvm", "tcg")
    errors = [c for c in parse_commands(proc.stdout) if c["kind"] == "error"]
    assert any("leaky.service" in c["message"] for c in errors), errors  # the soak's finding, annotated
    assert summary.read_text().startswith("## imagelint: ❌ FAIL")
    sarif = json.loads((workspace / "out/imagelint.sarif").read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []  # the machine and its files gone
