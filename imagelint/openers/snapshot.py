"""``ebs:snap-…``: an EBS snapshot read in place through the EBS direct APIs (``imagelint.aws.snapshot``).

:func:`open_snapshot` is the one way a snapshot becomes an opened target: the opener uses it for an
``ebs:`` spec. ``ami check --mode snapshot`` opens every snapshot of an AMI as one machine, with its
own clients (:func:`open_ami_disks`, :mod:`imagelint.aws.machine`).

Both sides of a diff: OLD's blocks are kept for NEW, which is read through ListChangedBlocks when
the two are of one lineage (:mod:`imagelint.aws.ebs_reuse`); the report's ``snapshot.blocks`` says
which blocks each side fetched or reused, and why NEW was read in full if it was. A side whose
audit came from the audit cache is noted (:meth:`SnapshotOpener.cached`): NEW is read through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from imagelint import lazy, stderr
from imagelint.errors import UsageError
from imagelint.openers import Opened, OpenOptions, require_os_root
from imagelint.report import Report

if TYPE_CHECKING:
    from imagelint.aws.clients import Clients
    from imagelint.aws.ebs_reuse import SharedBlocks
    from imagelint.aws.progress import Progress
    from imagelint.aws.snapshot import SnapshotSettings

PREFIX = "ebs:"  # checked without importing imagelint.aws: only a snapshot spec loads it
KIND = "ebs-snapshot"
SNAPSHOT_ID = lazy.regex(r"^snap-[0-9a-f]{8}([0-9a-f]{9})?$")


def snapshot_id_of(spec: str) -> str:
    """``ebs:snap-…`` → the snapshot id; a malformed id is bad usage."""
    snapshot_id = spec.removeprefix(PREFIX)
    if not SNAPSHOT_ID().match(snapshot_id):
        raise UsageError(f"{spec!r}: give ebs:snap-xxxxxxxx (a snapshot id)")
    return snapshot_id


@contextlib.contextmanager
def open_snapshot(
    clients: Clients,
    snapshot_id: str,
    settings: SnapshotSettings,
    progress: Progress,
    shared: tuple[SharedBlocks, str] | None = None,
) -> Iterator[Opened]:
    """The snapshot opened as a disk target; its report gets the stream's counters and names it.
    ``shared``: a diff's blocks and this snapshot's side (OLD's blocks are kept for NEW)."""
    from imagelint.aws.snapshot import snapshot_target, stream_facts

    spec = PREFIX + snapshot_id
    through = None if shared is None else shared[0].reader(shared[1], clients.region)
    with snapshot_target(clients, snapshot_id, settings, progress, through) as (target, stream):
        read = None if shared is None else shared[0].sides[shared[1]]
        fallback = None if read is None else read.facts()["fallback"]
        if fallback:
            stderr.warning(f"{spec}: read in full, not through the changes since OLD: {fallback}")
        progress.phase("auditing", f"{snapshot_id}: {len(stream.allocated)} blocks allocated")

        def annotate(report: Report) -> Report:
            stream.raise_if_failed()
            report.target = {"kind": KIND, "path": spec, "snapshot_id": snapshot_id, "region": clients.region}
            report = stream_facts(report, snapshot_id, clients.region, stream, progress)
            if read is not None:
                report.facts["snapshot"]["blocks"] = read.facts()
            return report

        yield Opened(KIND, target, annotate=annotate)
    if shared is not None:
        shared[0].done()


@contextlib.contextmanager
def open_ami_disks(
    clients: Clients,
    mappings: tuple[dict[str, Any], ...],
    root_device: str,
    settings: SnapshotSettings,
    progress: Progress,
) -> Iterator[Opened]:
    """Every EBS snapshot of an AMI's block device mappings opened as one machine
    (:mod:`imagelint.aws.machine`): fstab mounts a separate /var from its own snapshot, as boot does."""
    from imagelint.aws.machine import machine_facts, machine_target, mappings_of, raise_if_failed

    disks = mappings_of(mappings)
    with machine_target(clients, disks, root_device, settings, progress) as target:
        read = sum(1 for d in disks if d.stream is not None and d.error is None)
        progress.phase("auditing", f"{read} snapshot(s) of {len(disks)} mapping(s)")

        def annotate(report: Report) -> Report:
            raise_if_failed(disks)
            return machine_facts(report, disks, root_device, clients.region, progress)

        opened = Opened(KIND, target, annotate=annotate)
        root = next((d.snapshot_id for d in disks if d.device_name == root_device), None)
        require_os_root(opened, f"{PREFIX}{root} ({root_device})" if root else root_device, OpenOptions())
        yield opened


class SnapshotOpener:
    kind = KIND
    order = 10

    def claims(self, spec: str, options: OpenOptions) -> bool:
        return spec.startswith(PREFIX) and not options.live

    def identity(self, spec: str, options: OpenOptions) -> str:
        """A snapshot never changes: its region and id name its content for good."""
        from imagelint.aws.clients import default_region

        return f"{PREFIX}{default_region(options.region)}:{snapshot_id_of(spec)}"

    def cached(self, spec: str, options: OpenOptions) -> None:
        """A diff side whose audit came from the audit cache: NEW is still read through its blocks."""
        if options.shared is not None and options.side is not None:
            from imagelint.aws.clients import default_region
            from imagelint.aws.ebs_reuse import SharedBlocks

            shared = options.shared.setdefault(KIND, SharedBlocks())
            shared.remember(options.side, default_region(options.region), snapshot_id_of(spec))

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.aws.clients import Clients, default_region
        from imagelint.aws.progress import Progress
        from imagelint.aws.snapshot import SnapshotSettings

        snapshot_id = snapshot_id_of(spec)
        clients = Clients(default_region(options.region))
        settings = SnapshotSettings(concurrency=options.concurrency, partition=options.partition)
        shared = None
        if options.shared is not None and options.side is not None:
            from imagelint.aws.ebs_reuse import SharedBlocks

            shared = (options.shared.setdefault(KIND, SharedBlocks()), options.side)
        with (
            Progress(interactive=options.interactive) as progress,
            open_snapshot(clients, snapshot_id, settings, progress, shared) as opened,
        ):
            yield opened


OPENER = SnapshotOpener()
