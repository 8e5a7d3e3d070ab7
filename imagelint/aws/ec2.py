"""EC2 side of the AMI flows: image checks, the throwaway instance, volumes, verdict tags.

Everything imagelint creates carries the tag ``imagelint:run=<run id>`` from the moment it exists
(``TagSpecifications`` on the create call, never a later ``create_tags``), so an interrupted run
leaves nothing that ``imagelint ami cleanup`` cannot find.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from imagelint.aws.errors import AwsError, call, waiter_error
from imagelint.errors import UsageError

RUN_TAG = "imagelint:run"
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256
# EC2 tag keys and values: letters (any language), digits, spaces and + - = . _ : / @
_TAG_CHARS = re.compile(r"^[\w\s+\-=.:/@]*$", re.UNICODE)
AMI_ID = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$")


@dataclass(frozen=True)
class ImageInfo:
    image_id: str
    region: str
    name: str
    root_device: str
    root_snapshot: str | None
    snapshots: list[str]
    architecture: str


@dataclass(frozen=True)
class LaunchSettings:
    instance_type: str = "t3.medium"
    subnet: str | None = None
    security_groups: tuple[str, ...] = ()
    instance_profile: str | None = None
    key_name: str | None = None


def run_tags(run_id: str, extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    tags = {RUN_TAG: run_id, "Name": f"imagelint-{run_id[:8]}", **(extra or {})}
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def describe_image(ec2: Any, image_id: str, region: str) -> ImageInfo:
    """The AMI, checked: it exists, is available, and boots from an EBS root device with a snapshot."""
    if not AMI_ID.match(image_id):
        raise UsageError(f"{image_id!r} is not an AMI id (ami-xxxxxxxx or ami-xxxxxxxxxxxxxxxxx)")
    try:
        images = call(ec2.describe_images, ImageIds=[image_id])["Images"]
    except AwsError as exc:
        if exc.code.startswith("InvalidAMIID"):
            raise UsageError(f"{image_id}: no such AMI in {region} ({exc.code})") from None
        raise
    if not images:
        raise UsageError(f"{image_id}: no such AMI in {region}")
    image = images[0]
    state = image.get("State", "available")
    if state != "available":
        raise UsageError(f"{image_id} is {state}, not available: wait for it or pick another image")
    root = image.get("RootDeviceName", "")
    # The root's block device mapping decides (moto reports RootDeviceType "standard" for images
    # made with CreateImage; AWS says "ebs" or "instance-store").
    root_is_ebs = any(
        m.get("DeviceName") == root and "Ebs" in m for m in image.get("BlockDeviceMappings", [])
    )
    if image.get("RootDeviceType") == "instance-store" or not (
        root_is_ebs or image.get("RootDeviceType") == "ebs"
    ):
        raise UsageError(f"{image_id} has an instance-store root device; only EBS-backed AMIs are supported")
    snapshots = [
        m["Ebs"]["SnapshotId"]
        for m in image.get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("SnapshotId")
    ]
    root_snap = next(
        (
            m["Ebs"].get("SnapshotId")
            for m in image.get("BlockDeviceMappings", [])
            if m.get("DeviceName") == root and "Ebs" in m
        ),
        None,
    )
    return ImageInfo(
        image_id=image_id,
        region=region,
        name=image.get("Name", ""),
        root_device=root,
        root_snapshot=root_snap,
        snapshots=snapshots,
        architecture=image.get("Architecture", "x86_64"),
    )


def launch_instance(ec2: Any, image: ImageInfo, settings: LaunchSettings, run_id: str) -> str:
    """One throwaway instance: IMDSv2 required, terminates itself on shutdown, tagged with the run."""
    params: dict[str, Any] = {
        "ImageId": image.image_id,
        "InstanceType": settings.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": run_tags(run_id, {"imagelint:image": image.image_id})},
            {"ResourceType": "volume", "Tags": run_tags(run_id)},
        ],
    }
    if settings.subnet:
        params["SubnetId"] = settings.subnet
    if settings.security_groups:
        params["SecurityGroupIds"] = list(settings.security_groups)
    if settings.instance_profile:
        key = "Arn" if settings.instance_profile.startswith("arn:") else "Name"
        params["IamInstanceProfile"] = {key: settings.instance_profile}
    if settings.key_name:
        params["KeyName"] = settings.key_name
    reply = call(ec2.run_instances, **params)
    return str(reply["Instances"][0]["InstanceId"])


def wait_running(ec2: Any, instance_id: str, *, poll: float, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        reply = call(ec2.describe_instances, InstanceIds=[instance_id])
        state = reply["Reservations"][0]["Instances"][0]["State"]["Name"]
        if state == "running":
            return
        if state in ("shutting-down", "terminated", "stopping", "stopped"):
            raise AwsError(
                "ec2",
                "DescribeInstances",
                "InstanceNotRunning",
                f"{instance_id} is {state}",
                "the instance's state reason in the EC2 console (image boot failure, capacity)",
            )
        if time.monotonic() > deadline:
            raise AwsError(
                "ec2",
                "DescribeInstances",
                "Timeout",
                f"{instance_id} still {state} after {timeout:.0f}s",
                "the instance's state reason and system log",
            )
        time.sleep(poll)


def terminate_instances(ec2: Any, instance_ids: list[str], *, wait: bool = True, poll: float = 5.0) -> None:
    """Terminate and (optionally) wait until every instance is terminated."""
    if not instance_ids:
        return
    call(ec2.terminate_instances, InstanceIds=instance_ids)
    if not wait:
        return
    waiter = ec2.get_waiter("instance_terminated")
    try:
        waiter.wait(InstanceIds=instance_ids, WaiterConfig={"Delay": max(1, round(poll)), "MaxAttempts": 120})
    except Exception as exc:  # botocore WaiterError
        raise waiter_error("ec2", "DescribeInstances", exc, "the instances in the EC2 console") from None


def create_volume(ec2: Any, snapshot_id: str, zone: str, run_id: str) -> str:
    reply = call(
        ec2.create_volume,
        SnapshotId=snapshot_id,
        AvailabilityZone=zone,
        VolumeType="gp3",
        TagSpecifications=[{"ResourceType": "volume", "Tags": run_tags(run_id)}],
    )
    return str(reply["VolumeId"])


def _wait(ec2: Any, name: str, api: str, poll: float, **kwargs: Any) -> None:
    try:
        ec2.get_waiter(name).wait(**kwargs, WaiterConfig={"Delay": max(1, round(poll)), "MaxAttempts": 120})
    except Exception as exc:
        raise waiter_error("ec2", api, exc, "the volume in the EC2 console") from None


def attach_volume(ec2: Any, volume_id: str, instance_id: str, device: str, *, poll: float) -> None:
    _wait(ec2, "volume_available", "DescribeVolumes", poll, VolumeIds=[volume_id])
    call(ec2.attach_volume, VolumeId=volume_id, InstanceId=instance_id, Device=device)
    _wait(ec2, "volume_in_use", "DescribeVolumes", poll, VolumeIds=[volume_id])


def remove_volume(ec2: Any, volume_id: str, *, poll: float, force: bool = False) -> None:
    """Detach (when attached) and delete a volume, waiting for each step."""
    volumes = call(ec2.describe_volumes, VolumeIds=[volume_id])["Volumes"]
    if not volumes:
        return
    for attachment in volumes[0].get("Attachments", []):
        params = {
            "VolumeId": volume_id,
            "InstanceId": attachment["InstanceId"],
            "Device": attachment["Device"],
        }
        call(ec2.detach_volume, **params, **({"Force": True} if force else {}))
    if volumes[0].get("Attachments"):
        _wait(ec2, "volume_available", "DescribeVolumes", poll, VolumeIds=[volume_id])
    call(ec2.delete_volume, VolumeId=volume_id)
    _wait(ec2, "volume_deleted", "DescribeVolumes", poll, VolumeIds=[volume_id])


def validate_tags(tags: dict[str, str]) -> None:
    """EC2's limits, checked before the call (moto, for one, accepts a 257-character value)."""
    for key, value in tags.items():
        if not key or len(key) > TAG_KEY_MAX:
            raise UsageError(f"tag key {key[:40]!r}: 1 to {TAG_KEY_MAX} characters")
        if key.lower().startswith("aws:"):
            raise UsageError(f"tag key {key!r}: the aws: prefix is reserved")
        if len(value) > TAG_VALUE_MAX:
            raise UsageError(f"tag {key}: value of {len(value)} characters (EC2 allows {TAG_VALUE_MAX})")
        for text in (key, value):
            if not _TAG_CHARS.match(text):
                raise UsageError(f"tag {key}: {text[:60]!r} has characters EC2 tags do not allow")


def tag_image(ec2: Any, image: ImageInfo, tags: dict[str, str]) -> None:
    validate_tags(tags)
    call(
        ec2.create_tags,
        Resources=[image.image_id, *image.snapshots],
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )


def act_on_failure(ec2: Any, image: ImageInfo, action: str) -> str:
    """--on-fail: deregister (and delete its snapshots) or deprecate now; returns what was done.

    deregister: ``DeregisterImage`` with ``DeleteAssociatedSnapshots``, then each snapshot of the
    image is deleted explicitly too (an endpoint may ignore that flag; one already gone is fine);
    a snapshot another AMI still uses (``InvalidSnapshot.InUse``) is kept and named in the line.
    deprecate: ``EnableImageDeprecation`` two minutes from now. A failing call is an
    :class:`AwsError` (one line with the API and the error code, exit 3).
    """
    if action == "deregister":
        call(ec2.deregister_image, ImageId=image.image_id, DeleteAssociatedSnapshots=True)
        return f"deregistered {image.image_id}; {_delete_snapshots(ec2, image.snapshots)}"
    if action == "deprecate":
        from datetime import UTC, datetime, timedelta

        at = (datetime.now(UTC) + timedelta(minutes=2)).replace(second=0, microsecond=0)
        call(ec2.enable_image_deprecation, ImageId=image.image_id, DeprecateAt=at)
        return f"{image.image_id} deprecated from {at:%Y-%m-%dT%H:%MZ}"
    return ""


def _delete_snapshots(ec2: Any, snapshots: list[str]) -> str:
    deleted: list[str] = []
    kept: list[str] = []
    for snapshot in snapshots:
        try:
            call(ec2.delete_snapshot, SnapshotId=snapshot)
        except AwsError as exc:
            if exc.code == "InvalidSnapshot.InUse":
                kept.append(snapshot)
                continue
            if exc.code != "InvalidSnapshot.NotFound":
                raise
        deleted.append(snapshot)
    done = f"deleted snapshot(s) {', '.join(deleted)}" if deleted else "no snapshot deleted"
    return done + (f"; kept {', '.join(kept)} (in use by another image)" if kept else "")
