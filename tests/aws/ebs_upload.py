"""Write a disk image to an EBS snapshot the way real uploaders do (coldsnap, AWS's own samples):
``StartSnapshot`` → ``PutSnapshotBlock`` for every 512 KiB block that is not all zeros, each with
its SHA256 checksum (base64) → ``CompleteSnapshot`` with the number of blocks written. Blocks left
out read as zeros, which is what a sparse image holds there.

``parent``: the snapshot is a child of that one (``ParentSnapshotId``), as an image pipeline's next
release is. Every non-zero block is still written: moto ignores the parent (the test front records
the lineage, :mod:`tests.aws.ebs_front`), so blocks the new image left as they were hold the same
data in both snapshots, which is what AWS's child snapshot shares with its parent."""

from __future__ import annotations

import base64
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BLOCK_SIZE = 524288
GIB = 1024**3
ZERO = bytes(BLOCK_SIZE)


def upload_image(
    ebs: Any, image: Path, *, description: str = "imagelint test image", parent: str | None = None
) -> tuple[str, int]:
    """(snapshot id, blocks written)."""
    size = image.stat().st_size
    volume_gib = max(1, -(-size // GIB))
    lineage = {} if parent is None else {"ParentSnapshotId": parent}
    snapshot_id = ebs.start_snapshot(VolumeSize=volume_gib, Description=description, Timeout=60, **lineage)[
        "SnapshotId"
    ]

    def put(index: int, data: bytes) -> None:
        ebs.put_snapshot_block(
            SnapshotId=snapshot_id,
            BlockIndex=index,
            BlockData=data,
            DataLength=len(data),
            Checksum=base64.b64encode(hashlib.sha256(data).digest()).decode(),
            ChecksumAlgorithm="SHA256",
        )

    written = 0
    with image.open("rb") as f, ThreadPoolExecutor(max_workers=4) as pool:
        futures = []
        for index in range(-(-size // BLOCK_SIZE)):
            data = f.read(BLOCK_SIZE).ljust(BLOCK_SIZE, b"\0")
            if data != ZERO:
                futures.append(pool.submit(put, index, data))
                written += 1
        for future in futures:
            future.result()
    ebs.complete_snapshot(SnapshotId=snapshot_id, ChangedBlocksCount=written)
    return snapshot_id, written


def register_image(
    ec2: Any,
    snapshot_id: str,
    *,
    name: str = "imagelint-snapshot-test",
    more: list[dict[str, Any]] | None = None,
) -> str:
    """RegisterImage with the snapshot as the root device (/dev/xvda), as image pipelines do, and
    ``more`` block device mappings after it (a /var volume, instance store).

    moto 5.2 ignores RegisterImage's BlockDeviceMappings and RootDeviceName: it gives the image an
    auto-created empty snapshot on /dev/sda1 and describes that one mapping whatever was asked. Its
    backends live in this process (the server is a thread), so the image is pointed at the requested
    snapshot and mappings there; DescribeImages then answers what AWS would."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    root = "/dev/xvda"
    mappings = [{"DeviceName": root, "Ebs": {"SnapshotId": snapshot_id}}, *(more or [])]
    image_id = str(
        ec2.register_image(
            Name=name,
            Architecture="x86_64",
            VirtualizationType="hvm",
            RootDeviceName=root,
            BlockDeviceMappings=mappings,
        )["ImageId"]
    )
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][ec2.meta.region_name]
    image = backend.amis[image_id]
    image.root_device_name, image.root_device_type = root, "ebs"
    image.ebs_snapshot = backend.snapshots[snapshot_id]
    if more:
        described = [
            {**m, "Ebs": {"VolumeSize": 1, "DeleteOnTermination": True, "VolumeType": "gp3", **m["Ebs"]}}
            if "Ebs" in m
            else m
            for m in mappings
        ]
        image.__class__ = type(
            "RegisteredImage", (type(image),), {"block_device_mappings": property(lambda _self: described)}
        )
    return image_id


def encrypted_image(env: Any) -> tuple[str, str, str]:
    """An AMI on a snapshot encrypted with a new customer managed key: (image, snapshot, key ARN).
    moto keeps a snapshot's KmsKeyId only from CopySnapshot, so the snapshot is a copy."""
    ec2 = env.client("ec2")
    key = env.client("kms").create_key(Description="imagelint test CMK")["KeyMetadata"]["Arn"]
    volume = ec2.create_volume(AvailabilityZone=f"{ec2.meta.region_name}a", Size=8)["VolumeId"]
    plain = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    snapshot = ec2.copy_snapshot(
        SourceSnapshotId=plain, SourceRegion=ec2.meta.region_name, Encrypted=True, KmsKeyId=key
    )["SnapshotId"]
    return register_image(ec2, snapshot, name="encrypted"), snapshot, key
