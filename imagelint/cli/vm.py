"""`imagelint vm check IMAGE`: boot a disk image in a local QEMU machine, audit and soak it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from imagelint.cli.application import MARKUP, app, friendly
from imagelint.cli.helptext import command, command_help
from imagelint.cli.options import with_run_options
from imagelint.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from imagelint.session import RunOptions

VM_INCONCLUSIVE = "inconclusive: no SSH in time, a panic, QEMU exiting, the disk cap, or data not read"
_SIZE = re.compile(r"([0-9]{1,7})([MG]i?B?|)", re.IGNORECASE)

vm_app = typer.Typer(
    short_help="Boot a disk image in a local VM, audit and soak it.",
    help=command_help("""Boot disk images in a throwaway local QEMU machine (`imagelint vm check IMAGE`)."""),
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)
app.add_typer(vm_app, name="vm")


def mebibytes(text: str, option: str) -> int:
    """``2G``, ``1536M``, ``2GiB`` or a plain number of MiB, in MiB."""
    found = _SIZE.fullmatch(text.strip())
    if not found:
        raise UsageError(f"{option} {text!r}: a size such as 2G or 1536M")
    value = int(found.group(1)) * (1024 if found.group(2)[:1].upper() == "G" else 1)
    if value <= 0:
        raise UsageError(f"{option} must be more than 0")
    return value


@command(
    vm_app, "check", meanings={ExitCode.INCONCLUSIVE: VM_INCONCLUSIVE}, short="Boot, audit and soak an image."
)
@friendly
@with_run_options
def vm_check(
    image: Annotated[
        Path,
        typer.Argument(
            metavar="IMAGE",
            dir_okay=False,
            help="Disk image (raw, qcow2, vmdk, vhd, vhdx) with a bootloader; never written.",
        ),
    ],
    soak: Annotated[
        str, typer.Option("--soak", help="How long to soak after boot: 60s, 10m; 0: audit only.")
    ] = "5m",
    interval: Annotated[str, typer.Option("--interval", "-i", help="Time between soak samples.")] = "5s",
    cpus: Annotated[int, typer.Option("--cpus", min=1, max=64, help="vCPUs of the machine.")] = 2,
    memory: Annotated[str, typer.Option("--memory", help="Memory of the machine: 2G, 1536M.")] = "2G",
    boot_timeout: Annotated[
        str, typer.Option("--boot-timeout", help="Deadline from power-on to SSH answering.")
    ] = "10m",
    accel: Annotated[
        str,
        typer.Option(
            "--accel",
            help="auto: KVM when /dev/kvm works and the guest's kernel prints within seconds, else TCG.",
        ),
    ] = "auto",
    firmware: Annotated[
        str,
        typer.Option(
            "--firmware",
            help="auto: UEFI (OVMF) for a GPT disk with an EFI System Partition and no BIOS boot path, "
            "else BIOS (SeaBIOS); or bios, uefi.",
        ),
    ] = "auto",
    disk_limit: Annotated[
        str, typer.Option("--disk-limit", help="Most the guest may write (the overlay's size): 4G.")
    ] = "4G",
    *,
    run: RunOptions,
) -> None:
    """Boot a disk image in a throwaway local QEMU machine, then audit and soak it over SSH.

    The image boots its own bootloader and kernel on a temporary overlay (the image is never
    written); a throwaway key reaches root through a NoCloud seed (cloud-init) or a systemd
    credential (ssh.authorized_keys.root, systemd 252+), whichever the image takes, read from the
    image before the boot: an image that takes neither is not booted (exit 3). The same collector
    as `soak ssh://HOST` audits the running machine and soaks it; one report, as `ami check` gives,
    says the accelerator, vCPUs, memory, guest kernel and cgroup layout. The machine and its files
    are removed afterwards, also on Ctrl-C or SIGTERM. Examples:

      imagelint vm check output/debian-12.qcow2 --soak 10m

      imagelint vm check disk.raw --soak 0 -f json:report.json
    """
    from imagelint.commands.vm import VmOptions, run_vm_check
    from imagelint.durations import parse_duration
    from imagelint.vm.machine import MachineSpec

    if accel not in ("auto", "kvm", "tcg"):
        raise UsageError(f"--accel {accel!r}: auto, kvm or tcg")
    if firmware not in ("auto", "bios", "uefi"):
        raise UsageError(f"--firmware {firmware!r}: auto, bios or uefi")
    machine = MachineSpec(
        image=image,
        cpus=cpus,
        memory_mib=mebibytes(memory, "--memory"),
        accel=accel,
        firmware=firmware,
        boot_timeout=parse_duration(boot_timeout, "--boot-timeout"),
        overlay_limit=mebibytes(disk_limit, "--disk-limit") << 20,
    )
    seconds = parse_duration(soak, "--soak", allow_zero=True)
    every = parse_duration(interval, "--interval")
    verdict = run_vm_check(VmOptions(machine, seconds, every), run)
    raise typer.Exit(int(verdict.exit_code))
