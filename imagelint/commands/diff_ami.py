"""``imagelint diff ami-OLD ami-NEW``: every EBS volume of two AMIs, matched by device name.

Each AMI's block device mappings (``DescribeImages``, :func:`imagelint.aws.ec2.describe_image`) name
its volumes' snapshots by device. A device both AMIs map is diffed as ``ebs:snap-OLD ebs:snap-NEW``
(:func:`imagelint.commands.diff.load_side`: incremental through ListChangedBlocks where the two
snapshots are of one lineage, the audit and block caches as for any snapshot pair), each pair with
its own ``shared`` blocks; a device only one AMI maps is one ``volumes`` change, not read. Every
change carries its device. The root volume is audited as an image; any other volume is audited as
a filesystem of its own (no mount model across volumes: a unit on a data volume that the root's
fstab mounts under /opt is judged as that volume's, not in the root's tree); a non-root volume with
no OS tree on it (a data volume) whose snapshot changed is one ``volumes`` change (its files are
not compared), and one with the same snapshot on both sides is not read.

One result: the sides name the AMIs (their root volume's inventory counts, ``complete`` only if
every volume read was), the changes of all volumes are judged by the one policy and
:func:`imagelint.diff.verdict.decide_diff`, and ``volumes`` lists each device's pair of sides.
An argument is an AMI when it is ``ami-…`` or ``region:ami-…`` (the region else ``--region``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagelint.diff.compare import Change, Side, compare
from imagelint.errors import UsageError
from imagelint.openers import OpenOptions
from imagelint.records import dataclass
from imagelint.targets.disk.errors import NoRootFilesystem

if TYPE_CHECKING:
    from imagelint.diff.cache import AuditCache
    from imagelint.session import PreparedRun

AMI_SPEC = re.compile(
    r"^(?:(?P<region>[a-z]{2}(?:-[a-z0-9]+)+-\d+):)?(?P<ami>ami-[0-9a-f]{8}(?:[0-9a-f]{9})?)$"
)
VERDICTS = ("pass", "fail", "inconclusive")  # worst last


def is_ami(argument: str) -> bool:
    return AMI_SPEC.match(argument) is not None


@dataclass(frozen=True)
class Ami:
    """One side's AMI: where, its root device, its EBS volumes' snapshots by device."""

    image_id: str
    region: str
    root_device: str
    volumes: dict[str, str]

    @property
    def description(self) -> str:
        return f"{self.image_id} ({self.region})"


def describe(argument: str, opening: OpenOptions) -> Ami:
    """The AMI an argument names, its EBS mappings (an instance-store or snapshot-less one is skipped)."""
    from imagelint.aws.clients import Clients, default_region
    from imagelint.aws.ec2 import describe_image
    from imagelint.aws.machine import mappings_of

    match = AMI_SPEC.match(argument)
    if match is None:  # pragma: no cover - callers check is_ami first
        raise UsageError(f"{argument!r} is not ami-… or region:ami-…")
    region = default_region(match["region"] or opening.region)
    info = describe_image(Clients(region).ec2, match["ami"], region)
    volumes = {
        m.device_name: m.snapshot_id for m in mappings_of(info.mappings) if m.device_name and m.snapshot_id
    }
    return Ami(info.image_id, region, info.root_device, volumes)


@dataclass
class VolumePair:
    """One device's two sides (None: that AMI does not map it)."""

    device: str
    old: Side | None
    new: Side | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "old": None if self.old is None else self.old.to_dict(),
            "new": None if self.new is None else self.new.to_dict(),
        }


LoadSide = Callable[[Path, "PreparedRun", OpenOptions, "AuditCache | None"], Side]


def ami_changes(
    old_arg: str,
    new_arg: str,
    run: PreparedRun,
    opening: OpenOptions,
    cache: AuditCache | None,
    load_side: LoadSide,
) -> tuple[Side, Side, list[Change], list[VolumePair]]:
    """Both AMIs' volumes read (each side with ``load_side``: :func:`imagelint.commands.diff.load_side`)
    and compared: the combined sides, every change (labelled by device, the policy not applied yet)
    and each device's pair."""
    old, new = describe(old_arg, opening), describe(new_arg, opening)
    devices = sorted(set(old.volumes) | set(new.volumes), key=lambda d: (d != new.root_device, d))
    changes: list[Change] = []
    pairs: list[VolumePair] = []
    for device in devices:
        old_snap, new_snap = old.volumes.get(device), new.volumes.get(device)
        if old_snap is None or new_snap is None:
            changes.append(_one_side(device, old, new, old_snap, new_snap))
            pairs.append(VolumePair(device, None, None))
            continue
        if device != new.root_device and (old.region, old_snap) == (new.region, new_snap):
            pairs.append(VolumePair(device, None, None))  # the same snapshot: the same volume
            continue
        shared: dict[str, Any] = {}
        # a volume besides the root is a filesystem of its own, not an OS root: no marks asked of it
        partial = opening.partial_root or device != new.root_device
        try:
            sides = [
                load_side(
                    Path(f"ebs:{snapshot}"),
                    run,
                    replace(opening, region=ami.region, side=side, shared=shared, partial_root=partial),
                    cache,
                )
                for ami, snapshot, side in ((old, old_snap, "old"), (new, new_snap, "new"))
            ]
        except NoRootFilesystem as exc:
            if device == new.root_device:
                raise
            changes.append(_data_volume(device, old_snap, new_snap, exc))
            pairs.append(VolumePair(device, None, None))
            continue
        for change in compare(*sides):
            change.device = device
            changes.append(change)
        pairs.append(VolumePair(device, *sides))
    read = [p for p in pairs if p.old is not None and p.new is not None]
    return _combined(old, read, "old"), _combined(new, read, "new"), changes, pairs


def _data_volume(device: str, old_snap: str, new_snap: str, why: NoRootFilesystem) -> Change:
    """A non-root volume with no OS tree on it (a data volume): its snapshots differ, its files are
    not compared (no mount model across volumes)."""
    return Change(
        "volumes",
        device,
        "changed",
        f"{device}: {old_snap} → {new_snap}, a volume with no OS tree ({why.message}); its files are "
        "not compared",
        old=old_snap,
        new=new_snap,
        device=device,
    )


def _one_side(device: str, old: Ami, new: Ami, old_snap: str | None, new_snap: str | None) -> Change:
    if new_snap is not None:
        return Change(
            "volumes",
            device,
            "added",
            f"{device}: a volume only {new.image_id} maps ({new_snap}); not compared",
            new=new_snap,
            device=device,
        )
    return Change(
        "volumes",
        device,
        "removed",
        f"{device}: a volume only {old.image_id} mapped ({old_snap}); not compared",
        old=old_snap,
        device=device,
    )


def _combined(ami: Ami, read: list[VolumePair], which: str) -> Side:
    """An AMI as one side: its root volume's inventory (or the first volume's), ``complete`` only if
    every volume read was, every volume's findings, the worst verdict."""
    sides = [p.old if which == "old" else p.new for p in read]
    present = [s for s in sides if s is not None]
    if not present:
        return Side(ami.description, "image", {"complete": True}, [], "pass")
    root = next(
        (s for s, p in zip(sides, read, strict=True) if p.device == ami.root_device and s), present[0]
    )
    inventory = {**root.inventory, "complete": all(s.complete for s in present)}
    verdict = max((s.verdict for s in present), key=lambda v: VERDICTS.index(v) if v in VERDICTS else 0)
    findings = [f for s in present for f in s.findings]
    source = "cache" if all(s.source == "cache" for s in present) else "image"
    return Side(ami.description, source, inventory, findings, verdict)
