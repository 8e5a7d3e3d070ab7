"""Read an EBS snapshot in place (``imagelint audit ebs:snap-…``, ``imagelint ami --mode snapshot``).

The snapshot is read through the EBS direct APIs (:mod:`imagelint.aws.ebs_blocks`) as a raw disk
and handed to the disk targets (:func:`imagelint.targets.disk.open_disk_target`), which find the
partition table and the root filesystem; no instance, no volume, no root, no mount. Permissions
needed: ``ebs:ListSnapshotBlocks``, ``ebs:GetSnapshotBlock`` (``ebs:ListChangedBlocks`` for a diff of
two snapshots, which reads NEW in full without it; ``ec2:DescribeImages`` for an AMI,
``ec2:DescribeSnapshots``, ``kms:Decrypt`` and ``kms:DescribeKey`` on the key of an encrypted
snapshot): :data:`IAM_POLICY`.

The report's ``facts["disk"]["io"]`` holds the stream's counters (blocks listed and fetched, bytes,
cache hits, retries); ``facts["snapshot"]`` names the snapshot. A fetch that failed ends the run with
its own one-line error (exit 3), whatever the filesystem reader made of the I/O error.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from imagelint.aws.policy import VERDICT_TAGS, statement
from imagelint.errors import UsageError, extra_hint
from imagelint.records import dataclass

if TYPE_CHECKING:
    from imagelint.aws.clients import Clients
    from imagelint.aws.ebs_api import EbsApi
    from imagelint.aws.ebs_blocks import BlockSource, SnapshotStream
    from imagelint.aws.progress import Progress
    from imagelint.report import Report

MIB = 1024 * 1024

# The read-only EBS direct APIs on snapshots (ListChangedBlocks: a diff of two), DescribeImages to
# find an AMI's root snapshot and DescribeSnapshots its owner and key (imagelint.aws.kms), and
# kms:Decrypt (the direct APIs decrypt the blocks) with kms:DescribeKey (the pre-flight's check of the
# key) for encrypted snapshots: narrow that Resource to the keys; CreateTags for --tag (the Packer
# offline gate tags the verdict on the AMI and its snapshots): the verdict's keys only, on this account's
# AMI and snapshots carrying the candidate tag (imagelint.aws.policy.VERDICT_TAGS).
IAM_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": ["ebs:ListSnapshotBlocks", "ebs:GetSnapshotBlock", "ebs:ListChangedBlocks"],
            "Resource": "arn:aws:ec2:*::snapshot/*",
        },
        {"Effect": "Allow", "Action": ["ec2:DescribeImages", "ec2:DescribeSnapshots"], "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:DescribeKey"],
            "Resource": "arn:aws:kms:*:*:key/*",
        },
        statement(VERDICT_TAGS),
    ],
}


@dataclass(frozen=True)
class SnapshotSettings:
    """How the snapshot is read (``--concurrency``, ``--partition``)."""

    concurrency: int = 16
    cache_mib: int = 64
    partition: int | None = None


@contextlib.contextmanager
def open_stream(
    clients: Clients,
    snapshot_id: str,
    settings: SnapshotSettings,
    progress: Progress | None = None,
    through: Callable[[EbsApi], BlockSource] | None = None,
) -> Iterator[SnapshotStream]:
    """The snapshot as a raw disk stream; progress (blocks fetched, MiB) while it is read. ``through``:
    where its blocks come from, given its API (default: the API itself)."""
    from imagelint.aws.call_window import CallWindow
    from imagelint.aws.ebs_api import BLOCK_SIZE, EbsApi
    from imagelint.aws.ebs_blocks import SnapshotStream

    if settings.concurrency < 1:
        raise UsageError(f"--concurrency {settings.concurrency}: give 1 or more")
    api = EbsApi(clients.ebs(settings.concurrency), snapshot_id, window=CallWindow(settings.concurrency))
    lock = threading.Lock()

    def show(counts: dict[str, int]) -> None:
        if progress is not None:
            with lock:
                progress.update(
                    f"{counts['blocks_fetched']} blocks fetched, {counts['bytes_fetched'] / MIB:.1f} MiB"
                )

    if progress is not None:
        progress.phase("listing blocks", snapshot_id)
    source = api if through is None else through(api)
    stream = SnapshotStream(
        source,
        cache_bytes=settings.cache_mib * MIB,
        concurrency=settings.concurrency,
        on_fetch=show,
    )
    likely = getattr(source, "likely", None)  # a diff's NEW: changed blocks OLD's walk read
    if likely is not None:
        stream.prefetch((index * BLOCK_SIZE, BLOCK_SIZE) for index in likely())
    try:
        if progress is not None:
            progress.phase("reading snapshot", f"{snapshot_id}: {len(stream.allocated)} blocks allocated")
        yield stream
    finally:
        stream.close()
        flush = getattr(source, "flush", None)  # a diff's source writes its blocks to the store now
        if flush is not None:
            flush()


@contextlib.contextmanager
def snapshot_target(
    clients: Clients,
    snapshot_id: str,
    settings: SnapshotSettings,
    progress: Progress | None = None,
    through: Callable[[EbsApi], BlockSource] | None = None,
) -> Iterator[tuple[Any, SnapshotStream]]:
    """The disk target over the snapshot (and its stream, for the counters)."""
    open_disk_target = disk_module().open_disk_target
    with open_stream(clients, snapshot_id, settings, progress, through) as stream:
        description = f"ebs:{snapshot_id} ({clients.region})"
        try:
            target = open_disk_target(
                stream, description=description, kind="ebs-snapshot", partition=settings.partition
            )
            yield target, stream
        except Exception:
            stream.raise_if_failed()  # the API's own error, not what a reader made of the I/O error
            raise
        stream.raise_if_failed()


def stream_facts(
    report: Report, snapshot_id: str, region: str, stream: SnapshotStream, progress: Progress | None
) -> Report:
    """The stream's counters in the report's facts (and a line of them in the progress log)."""
    counts = stream.stats()
    report.facts.setdefault("disk", {})["io"] = counts
    report.facts["snapshot"] = {
        "snapshot_id": snapshot_id,
        "region": region,
        "volume_bytes": stream.size,
        "blocks_allocated": counts["blocks_listed"],
        "blocks_fetched": counts["blocks_fetched"],
        "bytes_fetched": counts["bytes_fetched"],
    }
    if progress is not None:
        progress.log(
            f"ebs:{snapshot_id}: read {counts['blocks_fetched']} of {counts['blocks_listed']} blocks "
            f"({counts['bytes_fetched'] / MIB:.1f} MiB)"
        )
    return report


def disk_module() -> Any:
    """``imagelint.targets.disk``, or one line saying what is missing."""
    try:
        from imagelint.targets import disk
    except ImportError as exc:
        missing = getattr(exc, "name", "") or ""
        if missing.startswith("dissect"):
            raise UsageError(f"reading an EBS snapshot needs the disk extra: {extra_hint('disk')}") from None
        raise UsageError(
            "reading an EBS snapshot needs the disk image targets (imagelint.targets.disk), "
            "which this build of imagelint does not have"
        ) from None
    return disk
