"""`imagelint vm check IMAGE`: boot a disk image in a throwaway local QEMU machine, audit it and soak it.

Three parts, merged into one report as ``ami check`` merges its own (:func:`imagelint.report.merge.merge`):

- ``image``: the image-scope rules on the disk image itself, read offline by the disk opener before
  the boot, so what the boot and imagelint's own access write (the throwaway key in root's
  ``authorized_keys``, cloud-init's instance state for the seed, a machine id, host keys, a random
  seed) is never judged as baked into the image;
- ``host`` and ``soak``: the machine (:mod:`imagelint.vm.machine`) boots the image's own boot path on
  an overlay and answers over SSH; the same collector and transport as ``soak ssh://HOST`` gather, in
  one connection, what the host-scope rules read, ``systemctl show`` and the soak's samples; the
  bundle is judged here as any bundle is.

Before the boot, from the same opened image, :mod:`imagelint.vm.reachable` decides which ways in
the image takes (the NoCloud seed, the SMBIOS credential); only those are offered, and an image that
takes neither is not booted: one line says what is missing, the report carries it, exit 3.
A bare filesystem image (the disk opener found no partition table: the root filesystem is the whole
disk) has no bootloader: it is booted by the kernel and initrd its /boot offers, read from the same
opened image (:mod:`imagelint.vm.kernel`); none there is one line, exit 3, before any boot.

The report's ``facts.vm`` says what the machine was: accelerator, vCPUs, memory, the guest's kernel,
its cgroup layout, and how long each step took.

Whatever stops the run before a bundle comes back (no SSH in time, a panic, QEMU exiting, the
overlay's cap, the collector failing) is an inconclusive report with the reason and the console's
last lines; SIGINT and SIGTERM stop the machine and remove everything, exit 3.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagelint import stderr
from imagelint.collector.plan import Plan, needs_for
from imagelint.collector.ssh.spec import HostSpec
from imagelint.collector.ssh.transport import MARGIN, RemoteError, collect
from imagelint.errors import UsageError
from imagelint.facts.journal.console import ConsoleLog
from imagelint.records import dataclass
from imagelint.report import Report, Verdict
from imagelint.report.merge import empty_report, merge
from imagelint.rulepacks.model import Scope
from imagelint.session import (
    PreparedRun,
    RunOptions,
    audit_opened,
    evaluate,
    judge_console,
    judge_soak,
    prepare,
    publish,
)
from imagelint.targets.interface import Target
from imagelint.vm import VmError, kernel
from imagelint.vm.console import ConsoleTarget
from imagelint.vm.disk import allocated
from imagelint.vm.kernel import DirectBoot
from imagelint.vm.machine import Machine, MachineSpec, booted, signals_interrupt
from imagelint.vm.reachable import Access, decide, undetermined

if TYPE_CHECKING:
    from collections.abc import Iterator

    from imagelint.targets.disk.open import BareFilesystem

_ImagePart = tuple[tuple[str, Report], Access, Target | None]
CONSOLE_LINES = 20  # console lines in the report when the collector was never reached
CONSOLE_LINE_MAX = 300


@dataclass(frozen=True)
class VmOptions:
    machine: MachineSpec
    soak_seconds: float = 60.0
    soak_interval: float = 5.0


def run_vm_check(options: VmOptions, run_options: RunOptions) -> Verdict:
    if options.soak_interval > options.soak_seconds > 0:
        raise UsageError(
            f"--interval ({options.soak_interval:g}s) is longer than --soak ({options.soak_seconds:g}s)"
        )
    run = prepare(run_options)
    packs, config = run.rules
    needs = needs_for(packs, config, (Scope.HOST, Scope.SOAK), runtime=False)
    plan = Plan(needs, show=True, soak_seconds=options.soak_seconds, soak_interval=options.soak_interval)
    image = options.machine.image
    target = {"kind": "vm", "path": str(image)}
    with _image_part(run, image) as (offline, access, opened):
        direct: DirectBoot | None = None
        refusal = access.refusal
        bare = _bare(opened)
        if bare is not None:
            if options.machine.firmware != "auto":
                raise UsageError(
                    f"--firmware {options.machine.firmware}: {image} is a bare filesystem (no partition "
                    "table, no bootloader), booted by its own kernel directly; leave --firmware auto"
                )
            if refusal is None:
                try:
                    assert opened is not None
                    direct = kernel.plan(opened, bare.uuid, str(image))
                except VmError as exc:
                    refusal = exc.message
        if refusal is not None:  # no way in, or nothing to boot: no boot at all
            stderr.line(f"vm: {refusal}")
            report = merge([offline, ("vm", empty_report(target, refusal))], target)
            report.facts["vm"] = {"access": access.facts(), **({"boot": "direct-kernel"} if bare else {})}
            return publish(report, run_options)
        machine = replace(options.machine, seed=access.seed, credential=access.credential, direct=direct)
        if direct is not None:
            stderr.line(f"vm: {direct.why}; booting {direct.kernel_name} directly ({direct.append()})")
        report = _boot_and_judge(run, replace(options, machine=machine), plan.text(), offline, access)
    return publish(report, run_options)


def _boot_and_judge(
    run: PreparedRun, options: VmOptions, plan_text: str, offline: tuple[str, Report], access: Access
) -> Report:
    """Boot the machine, collect its bundle and judge it, beside the image read offline."""
    image = options.machine.image
    target = {"kind": "vm", "path": str(image)}
    stderr.line(f"vm: offering the key by {' and '.join(access.offered)}")
    stderr.line(f"vm: booting {image} ({options.machine.cpus} vCPU, {options.machine.memory_mib} MiB)")
    reached: Machine | None = None
    with signals_interrupt():
        try:
            with booted(options.machine) as machine:
                reached = machine
                soaking = f" and soaking {options.soak_seconds:g} s" if options.soak_seconds else ""
                stderr.line(
                    f"vm: SSH after {machine.boot_seconds:.0f} s ({machine.accel}); auditing{soaking}"
                )
                collecting_at = time.monotonic()
                bundle = collect(
                    HostSpec("127.0.0.1", "root"),
                    plan_text,
                    machine.scratch,
                    sudo=False,
                    timeout=options.soak_seconds + MARGIN,
                    client=machine.ssh,
                )
                timing = {
                    "power_on_to_collector_s": round(collecting_at - machine.powered_on, 1),
                    "collect_s": round(time.monotonic() - collecting_at, 1),
                }
                machine.check()
                parts = _machine_parts(run, bundle)
                timing.update(overlay_bytes=allocated(machine.scratch / "overlay.qcow2"))  # gone after
            # QEMU is stopped: the console is whole
            report = merge([offline, *parts, *_console_part(run, image, machine.console_log())], target)
            report.facts["vm"] = {**_vm_facts(machine, report, timing, options), "access": access.facts()}
        except (VmError, RemoteError) as exc:
            if isinstance(exc, VmError):
                log, tail = exc.log, exc.console
            else:  # the collector failed: the machine is stopped, its console whole
                log = reached.console_log() if reached else None
                tail = reached.console.last() if reached and reached.console else ""
            report = _inconclusive(run, image, target, offline, exc, (log, tail), access)
            direct = options.machine.direct
            report.facts["vm"].update(direct.facts() if direct else {"boot": "bootloader"})
    return report


@contextlib.contextmanager
def _image_part(run: PreparedRun, image: Path) -> Iterator[_ImagePart]:
    """The image-scope audit of the disk image as shipped (read offline, never written), from the
    same opened image the ways in it takes (:mod:`imagelint.vm.reachable`), and the opened image
    itself, kept open for a direct kernel boot to read its /boot. An image the disk opener cannot
    read (a file system it does not know) is an error of this part: the machine is still booted,
    offered both ways, and judged, and the run cannot pass."""
    from imagelint.errors import ImageLintError
    from imagelint.openers import open_spec

    with contextlib.ExitStack() as stack:
        try:
            opened = stack.enter_context(open_spec(str(image)))
            report = audit_opened(run, opened)
            assert opened.target is not None  # audit_opened refuses a target-less opening
            found: _ImagePart = ("image", report), decide(opened.target), opened.target
        except ImageLintError as exc:
            reason = f"the image could not be read offline for the image-scope rules: {exc.message}"
            part = ("image", empty_report({"kind": "disk", "path": str(image)}, reason))
            found = part, undetermined("the image could not be read offline"), None
        yield found


def _bare(target: Target | None) -> BareFilesystem | None:
    """The whole-disk root filesystem of a bare filesystem image (no partition table), else None."""
    from imagelint.targets.disk.open import BareFilesystem

    bare = getattr(target, "bare", None)
    return bare if isinstance(bare, BareFilesystem) else None


def _machine_parts(run: PreparedRun, bundle: Path) -> list[tuple[str, Report]]:
    """("host", …) and, with soak samples, ("soak", …) from the booted machine's bundle."""
    from imagelint.openers import open_spec

    with open_spec(str(bundle), kind="bundle") as opened:
        if opened.target is None:  # a bundle always opens as a target; this keeps mypy honest
            return []
        host = evaluate(run, opened.target, scopes=(Scope.HOST,), sources=opened.sources)
        parts = [("host", opened.annotate(host))]
        facts = opened.soak()
        if facts is not None:
            parts.append(("soak", judge_soak(run, opened.target, facts)))
        return parts


def _vm_facts(
    machine: Machine, report: Report, timing: dict[str, float], options: VmOptions
) -> dict[str, Any]:
    facts = {**machine.facts(), **timing}  # the overlay's size as it was before it was removed
    soak = report.facts.get("soak", {}).get("soak", {})
    layout = soak.get("layout", {}) if isinstance(soak, dict) else {}
    facts["cgroup_layout"] = layout.get("layout") if isinstance(layout, dict) else None
    facts["soak_s"] = options.soak_seconds
    accel = f"{facts['accelerator']}{' (' + machine.accel_note + ')' if machine.accel_note else ''}"
    kernel, cgroups = facts["guest_kernel"] or "unknown", facts["cgroup_layout"] or "unknown"
    direct = machine.spec.direct
    firmware = (
        f"direct kernel boot of {direct.kernel_name} ({direct.why})"
        if direct is not None
        else f"{'UEFI (OVMF)' if facts['firmware'] == 'uefi' else 'BIOS (SeaBIOS)'}: {machine.firmware_note}"
    )
    report.notes.insert(
        0,
        f"vm: {accel}, {firmware}, {facts['vcpus']} vCPU, {facts['memory_mib']} MiB, guest kernel "
        f"{kernel}, cgroup {cgroups}, SSH {facts['boot_to_ssh_s']:.0f} s after power-on",
    )
    return facts


def _console_part(run: PreparedRun, image: Path, log: ConsoleLog | None) -> list[tuple[str, Report]]:
    """("console", …): the console's kernel lines judged by the journal's kernel-line rules; their
    findings say ``scope: console``. None when QEMU never ran."""
    if log is None:
        return []
    with tempfile.TemporaryDirectory(prefix="imagelint-console-") as empty:
        return [("console", judge_console(run, ConsoleTarget(Path(empty), image), log))]


def _inconclusive(
    run: PreparedRun,
    image: Path,
    target: dict[str, Any],
    offline: tuple[str, Report],
    exc: VmError | RemoteError,
    console: tuple[ConsoleLog | None, str],
    access: Access,
) -> Report:
    """Why the machine could not be judged, beside what was: the image read offline and the console's
    kernel lines (a lockup before SSH answered is a finding), with the console's last lines."""
    log, tail = console
    parts = [offline, ("vm", empty_report(target, exc.message)), *_console_part(run, image, log)]
    report = merge(parts, target)
    lines = [line[:CONSOLE_LINE_MAX] for line in tail.splitlines() if line.strip()][-CONSOLE_LINES:]
    firmware = exc.firmware if isinstance(exc, VmError) else ""
    if firmware:
        report.notes.append(f"vm: firmware {firmware}")
    report.notes += [f"console: {line}" for line in lines] or ["console: (nothing printed)"]
    report.facts["vm"] = {
        "access": access.facts(),
        "accelerator": getattr(exc, "accel", "") or None,
        "firmware": firmware or None,
        "console_tail": tail,
    }
    return report
