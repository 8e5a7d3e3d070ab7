"""The disks an AMI gives an instance at boot, read in place: one EBS direct-API stream per snapshot
of its block device mappings, handed to the disk targets as one machine
(:func:`imagelint.targets.disk.open_disks`), so that ``/etc/fstab`` mounts a separate ``/var`` or
``/home`` from its own snapshot as the boot would.

Each mapping (``DescribeImages``' ``BlockDeviceMappings``: a ``DeviceName`` and exactly one of
``Ebs``, ``VirtualName``, ``NoDevice``) becomes one disk:

- ``Ebs`` with a ``SnapshotId``: its snapshot streamed; a snapshot whose listing fails (denied, not
  found, a key it cannot use) is a disk that could not be read, with that error as the reason;
- ``Ebs`` without one (an empty volume made at launch) and ``VirtualName`` (``ephemeralN``, instance
  store): blank disks, whose content is made after boot: recorded, never read;
- ``NoDevice``: no disk (the mapping suppresses one): recorded.

A disk's kernel names are its ``DeviceName`` and the Xen driver's rename of it (``/dev/sdb`` and
``/dev/xvdb``; ``/dev/sda1``, the classic root name, is disk ``a``): EC2 may attach a volume under
either. On Nitro instances the disks appear as NVMe devices named in discovery order, so a
``/dev/nvme*`` name in fstab cannot be tied to a mapping: the disk targets make that inconclusive.

The streams of one AMI share the block cache's budget (``SnapshotSettings.cache_mib``, 64 MiB, split
between them, 16 MiB at least each), so an AMI of several volumes holds about as much as one of a
single volume.
The report's ``facts["snapshot"]`` keeps the root snapshot's counters (as for one snapshot) and
lists every mapping under ``volumes``: device name, kind, snapshot id, status, blocks fetched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from imagelint.errors import ImageLintError, UsageError
from imagelint.records import dataclass

if TYPE_CHECKING:
    from imagelint.aws.clients import Clients
    from imagelint.aws.ebs_blocks import SnapshotStream
    from imagelint.aws.progress import Progress
    from imagelint.aws.snapshot import SnapshotSettings
    from imagelint.report import Report
    from imagelint.targets.disk import Disk

_XEN_NAME = re.compile(r"^/dev/(?:sd|xvd)([a-z]{1,2})\d*$")
MIB = 1024 * 1024
MIN_CACHE_MIB = 16
MAX_MAPPINGS = 128  # EC2 allows far fewer; a longer list is not an AMI's


def kernel_names(device_name: str) -> tuple[str, ...]:
    """The names a mapping's disk may have in the guest: ``/dev/sdX`` and ``/dev/xvdX`` for either."""
    xen = _XEN_NAME.match(device_name)
    if xen is None:
        return (device_name,)
    return (f"/dev/sd{xen.group(1)}", f"/dev/xvd{xen.group(1)}")


@dataclass
class Mapping:
    """One block device mapping of the AMI, and its stream once opened."""

    device_name: str
    kind: str  # "ebs", "instance store", "empty ebs", "no device"
    snapshot_id: str | None = None
    virtual_name: str | None = None
    stream: SnapshotStream | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.device_name} ({self.snapshot_id or self.virtual_name or self.kind})"


def mappings_of(raw: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[Mapping]:
    """The AMI's mappings, in its order (the root is found by device name)."""
    out: list[Mapping] = []
    for m in list(raw)[:MAX_MAPPINGS]:
        name = str(m.get("DeviceName", ""))
        if "NoDevice" in m:
            out.append(Mapping(name, "no device"))
        elif "Ebs" in m and m["Ebs"].get("SnapshotId"):
            out.append(Mapping(name, "ebs", snapshot_id=str(m["Ebs"]["SnapshotId"])))
        elif "Ebs" in m:
            out.append(Mapping(name, "empty ebs"))
        elif m.get("VirtualName"):
            out.append(Mapping(name, "instance store", virtual_name=str(m["VirtualName"])))
    return out


@contextlib.contextmanager
def machine_target(
    clients: Clients,
    mappings: list[Mapping],
    root_device: str,
    settings: SnapshotSettings,
    progress: Progress | None = None,
) -> Iterator[Any]:
    """The AMI's disks as one target: a stream per snapshot (the root's failure ends the run, another's
    is kept as the reason its disk could not be read), then the disk targets' machine over them."""
    from imagelint.aws.snapshot import disk_module, open_stream

    disk_targets = disk_module()
    root = next((i for i, m in enumerate(mappings) if m.device_name == root_device), None)
    if root is None or mappings[root].snapshot_id is None:
        raise UsageError(f"the root device {root_device} has no EBS snapshot among the AMI's mappings")
    count = sum(1 for m in mappings if m.snapshot_id is not None)
    # the AMI's streams share one cache budget (each keeps a floor of MIN_CACHE_MIB)
    shared = dataclasses.replace(settings, cache_mib=max(MIN_CACHE_MIB, settings.cache_mib // count))
    with contextlib.ExitStack() as stack:
        for index, mapping in enumerate(mappings):
            if mapping.snapshot_id is None:
                continue
            try:
                mapping.stream = stack.enter_context(
                    open_stream(clients, mapping.snapshot_id, shared, progress)
                )
            except ImageLintError as exc:
                if index == root:
                    raise
                mapping.error = str(exc)
        present = [m for m in mappings if m.kind != "no device"]  # a suppressed mapping is no disk
        disks = [_disk(disk_targets.Disk, m) for m in present]
        disk_root = present.index(mappings[root])
        description = f"{root_device} of the AMI ({clients.region})"
        try:
            target = disk_targets.open_disks(
                disks,
                description=description,
                kind="ebs-snapshot",
                root=disk_root,
                partition=settings.partition,
            )
        except Exception:
            root_stream = mappings[root].stream
            if root_stream is not None:
                root_stream.raise_if_failed()  # the API's own error, not a reader's I/O error
            raise
        for mapping, disk in zip(present, disks, strict=True):
            if disk.stream is None and mapping.stream is not None and mapping.error is None:
                mapping.error = disk.unreadable  # listed, but its content could not be read
        yield target


def _disk(disk_class: type[Disk], mapping: Mapping) -> Disk:
    names = kernel_names(mapping.device_name)
    facts = {"device_name": mapping.device_name, "snapshot_id": mapping.snapshot_id}
    if mapping.kind == "instance store":
        blank = f"instance store ({mapping.virtual_name}), empty at each boot: not image content"
        return disk_class(mapping.label, names=names, blank=blank, facts=facts)
    if mapping.kind == "empty ebs":
        return disk_class(mapping.label, names=names, blank="an empty EBS volume made at launch", facts=facts)
    stream = cast("BinaryIO | None", mapping.stream)  # read, seek, tell and size: all a raw disk needs
    return disk_class(mapping.label, stream, names=names, unreadable=mapping.error, facts=facts)


def raise_if_failed(mappings: list[Mapping]) -> None:
    """The first fetch failure of a disk the audit read (one line, exit 3)."""
    for mapping in mappings:
        if mapping.stream is not None and mapping.error is None:
            mapping.stream.raise_if_failed()


def machine_facts(
    report: Report, mappings: list[Mapping], root_device: str, region: str, progress: Progress | None
) -> Report:
    """Every mapping in ``facts["snapshot"]["volumes"]``; the root's counters as for one snapshot (and
    a line per snapshot read in the progress log)."""
    volumes: list[dict[str, Any]] = []
    for mapping in mappings:
        row: dict[str, Any] = {"device_name": mapping.device_name, "kind": mapping.kind}
        if mapping.snapshot_id:
            row["snapshot_id"] = mapping.snapshot_id
        if mapping.virtual_name:
            row["virtual_name"] = mapping.virtual_name
        if mapping.stream is not None and mapping.error is None:
            counts = mapping.stream.stats()
            row.update(
                status="read",
                volume_bytes=mapping.stream.size,
                blocks_allocated=counts["blocks_listed"],
                blocks_fetched=counts["blocks_fetched"],
                bytes_fetched=counts["bytes_fetched"],
            )
            if progress is not None:
                progress.log(
                    f"{mapping.device_name} ebs:{mapping.snapshot_id}: read {counts['blocks_fetched']} of "
                    f"{counts['blocks_listed']} blocks ({counts['bytes_fetched'] / MIB:.1f} MiB)"
                )
        elif mapping.snapshot_id:
            row.update(status="unreadable", reason=mapping.error or "not read")
        else:
            row["status"] = "not read (not image content)" if mapping.kind != "no device" else "suppressed"
        volumes.append(row)
    root = next(v for v in volumes if v["device_name"] == root_device)
    report.facts["snapshot"] = {
        **{k: v for k, v in root.items() if k not in ("device_name", "kind", "status")},
        "region": region,
        "volumes": volumes,
    }
    return report
