"""EC2 side of the AMI flows: image checks, the throwaway instance, volumes, verdict tags.

Everything imagelint creates carries the tag ``imagelint:run=<run id>`` from the moment it exists
(``TagSpecifications`` on the create call, never a later ``create_tags``), so an interrupted run
leaves nothing that ``imagelint ami cleanup`` cannot find; and the ``--resource-tag`` ones, which an
SCP may require on the creating call (the launch's network interface gets them too). Before anything
exists, a ``DryRun`` of the very RunInstances request asks AWS whether the policies allow it
(:func:`dry_run_launch`). ``--volume-kms-key`` encrypts every volume the run creates with that key.

What AWS does and moto does not model:

- EC2 is eventually consistent: right after ``RunInstances`` / ``CreateVolume`` (and for an early
  ``TerminateInstances``) the new id can answer ``*.NotFound`` for a few seconds. Those answers are
  retried with bounded backoff (:func:`retry_not_found`), never turned into exit 3 or a leak.
- An arm64 AMI does not boot on an x86_64 type: the default type follows the AMI's architecture
  (:data:`DEFAULT_TYPES`) and an explicit one is checked against ``DescribeInstanceTypes`` first.
- Every EBS mapping of the AMI is launched with ``DeleteOnTermination=true`` (an AMI may say false),
  and the user data is a dead-man switch: it powers the instance off at the run's deadline, and
  ``InstanceInitiatedShutdownBehavior=terminate`` turns that into a termination, so a runner killed
  with SIGKILL still leaves nothing running for longer than the run was allowed to take.
- ``StateReason`` of an instance that stopped on its way up (a KMS key it may not use, for one) is
  kept in the error; and every Describe call that can page is paginated.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from imagelint.aws.errors import AwsError, call, paginate, waiter_error
from imagelint.aws.polling import Pace
from imagelint.aws.signals import sdk_call
from imagelint.errors import UsageError
from imagelint.records import dataclass

RUN_TAG = "imagelint:run"
# when the resource may go: ISO 8601 UTC, its creation plus the run's planned length and a margin;
# `imagelint ami cleanup` removes only what carries RUN_TAG and a DEADLINE_TAG in the past
DEADLINE_TAG = "imagelint:deadline"
DEFAULT_LIFETIME = 3600.0  # seconds a resource may live when the caller plans no length of its own
DEADLINE_MARGIN = 900.0  # on top of the planned length: the run's own teardown after it
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256
# EC2 tag keys and values: letters (any language), digits, spaces and + - = . _ : / @
_TAG_CHARS = re.compile(r"^[\w\s+\-=.:/@]*$", re.UNICODE)
AMI_ID = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$")
MAX_TAGS = 50  # per resource, the ones already there included
DEFAULT_TYPES = {"x86_64": "t3.medium", "arm64": "t4g.medium"}
NOT_FOUND_TRIES = 8  # about a minute of backoff: 1, 2, 4, 8, 15, 15, 15 s
T = TypeVar("T")


@dataclass(frozen=True)
class ImageInfo:
    image_id: str
    region: str
    name: str
    root_device: str
    root_snapshot: str | None
    snapshots: list[str]
    architecture: str
    mappings: tuple[dict[str, Any], ...] = ()  # the AMI's BlockDeviceMappings
    tag_keys: frozenset[str] = frozenset()  # the AMI's tags now (for the 50-tag limit)
    owner: str = ""  # the account that owns the AMI (another one's, shared: not ours to deregister)


def retry_not_found(
    func: Callable[..., T], /, *, tries: int = NOT_FOUND_TRIES, delay: float = 1.0, **kwargs: Any
) -> T:
    """``call`` that retries ``*.NotFound`` answers (EC2's eventual consistency) with bounded backoff."""
    for attempt in range(tries):
        try:
            return call(func, **kwargs)
        except AwsError as exc:
            if not exc.code.endswith(".NotFound") or attempt == tries - 1:
                raise
            time.sleep(min(delay * 2**attempt, 15 * delay))
    raise AssertionError("unreachable")


def instances_of(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for reservation in pages for i in reservation.get("Instances", [])]


def instance_type_for(ec2: Any, image: ImageInfo, settings: LaunchSettings) -> str:
    """The instance type to launch: the default for the AMI's architecture, or the one given, checked
    against ``DescribeInstanceTypes`` so that an arm64 AMI on an x86_64 type fails before launch."""
    if not settings.instance_type:
        if image.architecture not in DEFAULT_TYPES:
            raise UsageError(
                f"{image.image_id} is {image.architecture}: no default instance type, give --instance-type"
            )
        return DEFAULT_TYPES[image.architecture]
    types = paginate(ec2, "describe_instance_types", "InstanceTypes", InstanceTypes=[settings.instance_type])
    if not types:
        raise UsageError(f"--instance-type {settings.instance_type}: not offered in {image.region}")
    supported = types[0].get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    if image.architecture not in supported:
        raise UsageError(
            f"--instance-type {settings.instance_type} runs {'/'.join(supported) or '?'}, "
            f"but {image.image_id} is {image.architecture}: pick a {image.architecture} type "
            f"(e.g. {DEFAULT_TYPES.get(image.architecture, '?')}) or leave --instance-type out"
        )
    return settings.instance_type


def deadman_user_data(deadline_seconds: float) -> str:
    """cloud-init / plain shell user data that powers the instance off at the run's deadline.

    With ``InstanceInitiatedShutdownBehavior=terminate`` the power-off terminates the instance
    (EBS volumes with ``DeleteOnTermination`` go with it). ``shutdown -P +M`` is systemd's and
    sysvinit's; the ``sleep`` fallback covers an image without ``shutdown``."""
    minutes = max(1, -(-int(deadline_seconds) // 60))
    return (
        "#!/bin/sh\n"
        "# imagelint dead-man switch: the run may take at most this long; then the instance terminates\n"
        f"shutdown -P +{minutes} 'imagelint run deadline' || {{ (sleep {minutes * 60}; poweroff -f) "
        ">/dev/null 2>&1 & }\n"
    )


def encrypted(kms_key: str | None) -> dict[str, Any]:
    """The EBS parameters of a volume encrypted with ``kms_key`` (none: the snapshot's or the
    account's default encryption decides)."""
    return {"Encrypted": True, "KmsKeyId": kms_key} if kms_key else {}


def launch_mappings(image: ImageInfo, kms_key: str | None = None) -> list[dict[str, Any]]:
    """Every EBS mapping of the AMI with ``DeleteOnTermination=true`` (an AMI's own false would leak).

    The AMI's own snapshot, size and type are repeated (same values, so nothing changes on AWS; moto
    refuses an override without them); the encryption settings are left to the AMI's, unless
    ``kms_key`` (``--volume-kms-key``) is given: then every volume is encrypted with it."""
    out: list[dict[str, Any]] = []
    for mapping in image.mappings:
        ebs = mapping.get("Ebs")
        if ebs is None or "DeviceName" not in mapping:
            continue
        kept = {
            k: ebs[k] for k in ("SnapshotId", "VolumeSize", "VolumeType", "Iops", "Throughput") if k in ebs
        }
        out.append(
            {
                "DeviceName": mapping["DeviceName"],
                "Ebs": {**kept, "DeleteOnTermination": True, **encrypted(kms_key)},
            }
        )
    return out


@dataclass(frozen=True)
class LaunchSettings:
    instance_type: str | None = None  # None: DEFAULT_TYPES by the AMI's architecture
    subnet: str | None = None
    security_groups: tuple[str, ...] = ()
    instance_profile: str | None = None
    key_name: str | None = None
    tags: tuple[tuple[str, str], ...] = ()  # --resource-tag: on every resource the run creates
    kms_key: str | None = None  # --volume-kms-key (its ARN once checked): every volume encrypted with it
    public_ip: bool | None = None  # False: no public IPv4 even if the subnet maps one (None: its default)
    deadline: str = ""  # the deadline tag of what the run creates (deadline_after; "": DEFAULT_LIFETIME)
    # --instance-type and --subnet given again: tried in order when EC2 has no room (imagelint.aws.capacity)
    more_types: tuple[str, ...] = ()
    more_subnets: tuple[str, ...] = ()


OWN_TAGS = 4  # the most tags a run puts on one resource itself (run, deadline, Name and one more)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def deadline_after(seconds: float, now: datetime | None = None) -> str:
    """The deadline tag's value for a resource created ``now`` that may live ``seconds``."""
    when = (now or datetime.now(UTC)) + timedelta(seconds=max(0.0, seconds) + DEADLINE_MARGIN)
    return when.strftime(TIME_FORMAT)


def parse_deadline(value: str) -> datetime | None:
    """A deadline tag's time, or None for a value no run wrote."""
    try:
        return datetime.strptime(value, TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def run_tags(
    run_id: str,
    extra: dict[str, str] | None = None,
    resource: tuple[tuple[str, str], ...] = (),
    *,
    deadline: str = "",
) -> list[dict[str, str]]:
    """The tags of a resource the run creates: ``resource`` (``--resource-tag``; its ``Name`` wins),
    then the run's own, which no ``--resource-tag`` can replace (they start ``imagelint:``): the run
    id and the deadline (``deadline``, one value for the whole run so its DryRun is its launch; none
    given: :data:`DEFAULT_LIFETIME` from now), always."""
    own = {RUN_TAG: run_id, DEADLINE_TAG: deadline or deadline_after(DEFAULT_LIFETIME)}
    tags = {"Name": f"imagelint-{run_id[:8]}", **dict(resource), **own, **(extra or {})}
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def parse_resource_tags(given: list[str]) -> tuple[tuple[str, str], ...]:
    """``--resource-tag KEY=VALUE`` (repeatable), checked against EC2's (and IAM's: the same) limits
    with room for the run's own tags; a bad one is one line (exit 2)."""
    tags: dict[str, str] = {}
    for text in given:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise UsageError(f"--resource-tag {text!r}: give KEY=VALUE")
        if key in tags:
            raise UsageError(f"--resource-tag {key}: given twice")
        if key.lower().startswith("imagelint:"):
            raise UsageError(f"--resource-tag {key}: the imagelint: prefix is the run's own")
        tags[key] = value
    try:
        validate_tags(tags, existing=OWN_TAGS)
    except UsageError as exc:
        raise UsageError(f"--resource-tag: {exc}") from None
    return tuple(tags.items())


def foreign_platform(image: dict[str, Any]) -> str | None:
    """What the AMI is when it is not a Linux image, from DescribeImages: ``Platform`` (``windows``),
    ``PlatformDetails`` (``Windows``, ``Windows with SQL Server ...``) and the Mac architectures
    (``x86_64_mac``, ``arm64_mac``: EC2 Mac instances boot macOS only)."""
    details = str(image.get("PlatformDetails") or "")
    if str(image.get("Platform") or "").lower() == "windows" or details.lower().startswith("windows"):
        return f"Windows ({details[:80]})" if details else "Windows"
    if str(image.get("Architecture") or "").endswith("_mac") or "macos" in details.lower():
        return f"macOS ({image.get('Architecture')})"
    return None


def mapped_snapshots(image: dict[str, Any]) -> list[str]:
    """The snapshots of a ``DescribeImages`` image's own BlockDeviceMappings."""
    return [
        m["Ebs"]["SnapshotId"]
        for m in image.get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("SnapshotId")
    ]


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
    foreign = foreign_platform(image)
    if foreign:
        raise UsageError(
            f"{image_id} is a {foreign} AMI: imagelint checks Linux images; nothing was launched or created"
        )
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
    snapshots = mapped_snapshots(image)
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
        mappings=tuple(image.get("BlockDeviceMappings", [])),
        tag_keys=frozenset(t["Key"] for t in image.get("Tags", [])),
        owner=str(image.get("OwnerId") or ""),
    )


BURSTABLE = frozenset({"t2", "t3", "t3a", "t4g"})  # instance families with CPU credits


def launch_params(
    image: ImageInfo, settings: LaunchSettings, run_id: str, *, deadline: float = 0.0
) -> dict[str, Any]:
    """The RunInstances request of :func:`launch_instance` (its DryRun pre-flight sends the same)."""
    instance_type = settings.instance_type or DEFAULT_TYPES.get(image.architecture, "t3.medium")
    # the run's deadline, or the dead-man switch's when there is one
    life = settings.deadline or deadline_after(deadline if deadline > 0 else DEFAULT_LIFETIME)
    specs = [
        {
            "ResourceType": "instance",
            "Tags": run_tags(run_id, {"imagelint:image": image.image_id}, settings.tags, deadline=life),
        },
        {"ResourceType": "volume", "Tags": run_tags(run_id, resource=settings.tags, deadline=life)},
    ]
    if settings.tags:  # only then: tagging the interface needs ec2:CreateTags on network-interface
        interface_tags = run_tags(run_id, resource=settings.tags, deadline=life)
        specs.append({"ResourceType": "network-interface", "Tags": interface_tags})
    params: dict[str, Any] = {
        "ImageId": image.image_id,
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        "TagSpecifications": specs,
    }
    if instance_type.split(".")[0] in BURSTABLE:
        params["CreditSpecification"] = {"CpuCredits": "standard"}
    if settings.subnet and settings.public_ip is False:
        # only an interface spec can refuse the address a subnet maps; subnet and groups go in it
        interface: dict[str, Any] = {
            "DeviceIndex": 0,
            "SubnetId": settings.subnet,
            "AssociatePublicIpAddress": False,
        }
        if settings.security_groups:
            interface["Groups"] = list(settings.security_groups)
        params["NetworkInterfaces"] = [interface]
    else:
        if settings.subnet:
            params["SubnetId"] = settings.subnet
        if settings.security_groups:
            params["SecurityGroupIds"] = list(settings.security_groups)
    if settings.instance_profile:
        key = "Arn" if settings.instance_profile.startswith("arn:") else "Name"
        params["IamInstanceProfile"] = {key: settings.instance_profile}
    if settings.key_name:
        params["KeyName"] = settings.key_name
    mappings = launch_mappings(image, settings.kms_key)
    if mappings:
        params["BlockDeviceMappings"] = mappings
    if deadline > 0:
        params["UserData"] = deadman_user_data(deadline)  # boto3 base64-encodes it
    return params


def launch_instance(
    ec2: Any, image: ImageInfo, settings: LaunchSettings, run_id: str, *, deadline: float = 0.0
) -> str:
    """One throwaway instance: IMDSv2 required, terminates itself on shutdown, tagged with the run,
    every EBS volume deleted on termination, powered off by its user data after ``deadline`` s; a
    burstable type in standard credit mode (T3 and T4g default to unlimited, which bills a crash loop
    that burns CPU for as long as it runs)."""
    reply = call(ec2.run_instances, **launch_params(image, settings, run_id, deadline=deadline))
    return str(reply["Instances"][0]["InstanceId"])


DRY_RUN_REFUSED = (
    "the runner's IAM policy, the organization's SCPs and tag policies (--resource-tag KEY=VALUE "
    "adds tags they require); nothing was created"
)


def dry_run_launch(
    ec2: Any, image: ImageInfo, settings: LaunchSettings, run_id: str, *, deadline: float = 0.0
) -> None:
    """RunInstances with ``DryRun=True`` and the request of the real launch: AWS evaluates the
    runner's policy, SCPs and tag policies and answers ``DryRunOperation`` when the launch would be
    allowed. A refusal (``UnauthorizedOperation``) is one line with AWS's message (exit 3). An
    endpoint that ignored the flag and launched is not trusted either: the caller's cleanup finds
    that instance by the run tag."""
    try:
        call(ec2.run_instances, **launch_params(image, settings, run_id, deadline=deadline), DryRun=True)
    except AwsError as exc:
        if exc.code == "DryRunOperation":
            return
        if exc.code == "UnauthorizedOperation":
            raise AwsError("ec2", "RunInstances (DryRun)", exc.code, exc.detail, DRY_RUN_REFUSED) from None
        raise
    raise AwsError(
        "ec2",
        "RunInstances (DryRun)",
        "DryRunIgnored",
        "the endpoint launched instead of answering DryRunOperation",
        "the endpoint (AWS_ENDPOINT_URL); the run's cleanup terminates what it launched",
    )


NOT_RUNNING = ("shutting-down", "terminated", "stopping", "stopped")  # states it does not come back from


def describe_instance(ec2: Any, instance_id: str, *, delay: float = 1.0) -> dict[str, Any]:
    """One instance, by id, retrying the NotFound a fresh id can answer."""
    reply = retry_not_found(ec2.describe_instances, InstanceIds=[instance_id], delay=delay)
    found = instances_of(reply.get("Reservations", []))
    if not found:
        raise AwsError("ec2", "DescribeInstances", "InvalidInstanceID.NotFound", f"{instance_id} not found")
    return found[0]


def wait_running(ec2: Any, instance_id: str, *, poll: float, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pace = Pace(poll)
    while True:
        instance = pace.look(lambda: describe_instance(ec2, instance_id, delay=min(1.0, poll)))
        state = "pending" if instance is None else instance["State"]["Name"]
        if state == "running":
            return
        if instance is not None and state in NOT_RUNNING:
            reason = instance.get("StateReason", {})
            why = f" ({reason.get('Message') or reason.get('Code')})" if reason else ""
            raise AwsError(
                "ec2",
                "DescribeInstances",
                "InstanceNotRunning",
                f"{instance_id} is {state}{why}",
                "the state reason: a KMS key the instance may not use, an image that does not boot, capacity",
            )
        if time.monotonic() > deadline:
            raise AwsError(
                "ec2",
                "DescribeInstances",
                "Timeout",
                f"{instance_id} still {state} after {timeout:.0f}s{pace.note}",
                "the instance's state reason and system log",
            )
        pace.pause()


def terminate_instances(ec2: Any, instance_ids: list[str], *, wait: bool = True, poll: float = 5.0) -> None:
    """Terminate and (optionally) wait until every instance is terminated."""
    if not instance_ids:
        return
    retry_not_found(ec2.terminate_instances, InstanceIds=instance_ids, delay=min(1.0, poll))
    if wait:
        wait_terminated(ec2, instance_ids, poll=poll)


def wait_terminated(ec2: Any, instance_ids: list[str], *, poll: float = 5.0) -> None:
    """Wait until every instance is terminated (at most 120 polls, 120 s at least)."""
    deadline = time.monotonic() + 120 * max(1.0, poll)
    left = set(instance_ids)
    pace = Pace(poll)
    while left:
        pages = pace.look(paginate, ec2, "describe_instances", "Reservations", InstanceIds=sorted(left))
        if pages is not None:
            left = {i["InstanceId"] for i in instances_of(pages) if i["State"]["Name"] != "terminated"}
        if not left:
            return
        if time.monotonic() > deadline:
            raise AwsError(
                "ec2",
                "DescribeInstances",
                "Timeout",
                f"{', '.join(sorted(left))} not terminated yet{pace.note}",
                "the instances in the EC2 console; `imagelint ami cleanup` removes them later",
            )
        pace.pause()


def console_text(ec2: Any, instance_id: str) -> str:
    """The instance's serial console as AWS gives it (``GetConsoleOutput``, the latest 64 KiB on
    Nitro), unescaped: image output, for parsing only. Empty when there is none yet or the call
    fails. AWS sends it base64-encoded; botocore decodes it (``decode_console_output``, UTF-8 with
    replacement)."""
    try:
        reply = call(ec2.get_console_output, InstanceId=instance_id, Latest=True)
    except AwsError:
        return ""
    return str(reply.get("Output") or "")


def console_output(ec2: Any, instance_id: str, limit: int = 2000) -> str:
    """The tail of the instance's serial console, escaped for a terminal or CI log; it only adds to
    another error."""
    from imagelint.report.escape import for_log

    return for_log(console_text(ec2, instance_id)[-limit:])


def check_zone(ec2: Any, zone: str, image: ImageInfo) -> None:
    """Volume mode creates the volume in the runner's zone, which must be in the AMI's region."""
    reply = call(ec2.describe_availability_zones, AllAvailabilityZones=True)
    if zone not in {z.get("ZoneName") for z in reply.get("AvailabilityZones", [])}:
        raise UsageError(
            f"--mode volume: this runner is in {zone}, outside {image.image_id}'s region {image.region}; "
            f"run it on a runner in {image.region} (or copy the AMI there, or use --mode launch)"
        )


def create_volume(
    ec2: Any, snapshot_id: str, zone: str, run_id: str, settings: LaunchSettings | None = None
) -> str:
    """A gp3 volume from the snapshot in ``zone`` (the runner's), tagged with the run (and
    ``--resource-tag``), encrypted with ``--volume-kms-key`` when given."""
    settings = settings or LaunchSettings()
    reply = call(
        ec2.create_volume,
        SnapshotId=snapshot_id,
        AvailabilityZone=zone,
        VolumeType="gp3",
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": run_tags(run_id, resource=settings.tags, deadline=settings.deadline),
            }
        ],
        **encrypted(settings.kms_key),
    )
    return str(reply["VolumeId"])


def _wait(ec2: Any, name: str, api: str, poll: float, **kwargs: Any) -> None:
    try:
        with sdk_call():
            ec2.get_waiter(name).wait(
                **kwargs, WaiterConfig={"Delay": max(1, round(poll)), "MaxAttempts": 120}
            )
    except Exception as exc:
        raise waiter_error("ec2", api, exc, "the volume in the EC2 console") from None


def wait_volume(ec2: Any, volume_id: str, want: str, *, poll: float, attempts: int = 120) -> None:
    """Poll until the volume is ``want``; its ``error`` state (and ``deleted``) fail at once, a fresh
    id's NotFound is retried (botocore's ``volume_available`` waiter has neither)."""
    pace = Pace(poll)
    for _ in range(attempts):
        reply = pace.look(
            lambda: retry_not_found(ec2.describe_volumes, VolumeIds=[volume_id], delay=min(1.0, poll))
        )
        volumes = None if reply is None else reply["Volumes"]
        state = "unknown" if volumes is None else volumes[0]["State"] if volumes else "deleted"
        if state == want:
            return
        if state in ("error", "deleted") or (state == "deleting" and want != "deleted"):
            raise AwsError(
                "ec2",
                "DescribeVolumes",
                f"Volume{state.title()}",
                f"{volume_id} is {state}, not {want}",
                "the snapshot (a KMS key this runner may not use) and the volume in the EC2 console",
            )
        pace.pause()
    raise AwsError(
        "ec2",
        "DescribeVolumes",
        "Timeout",
        f"{volume_id} not {want} in time{pace.note}",
        "the volume in the EC2 console",
    )


def attach_volume(ec2: Any, volume_id: str, instance_id: str, device: str, *, poll: float) -> None:
    wait_volume(ec2, volume_id, "available", poll=poll)
    call(ec2.attach_volume, VolumeId=volume_id, InstanceId=instance_id, Device=device)
    wait_volume(ec2, volume_id, "in-use", poll=poll)


def remove_volume(ec2: Any, volume_id: str, *, poll: float, force: bool = False) -> None:
    """Detach (when attached) and delete a volume, waiting for each step."""
    try:
        volumes = retry_not_found(ec2.describe_volumes, VolumeIds=[volume_id], delay=min(1.0, poll))[
            "Volumes"
        ]
    except AwsError as exc:
        if exc.code == "InvalidVolume.NotFound":
            return  # never became visible after a minute, or gone already
        raise
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
        wait_volume(ec2, volume_id, "available", poll=poll)
    call(ec2.delete_volume, VolumeId=volume_id)
    _wait(ec2, "volume_deleted", "DescribeVolumes", poll, VolumeIds=[volume_id])


def validate_tags(tags: dict[str, str], existing: int = 0) -> None:
    """EC2's limits, checked before the call (moto, for one, accepts a 257-character value): 50 tags
    per resource (``existing`` ones included), keys of 1-128 and values of 0-256 characters."""
    if existing + len(tags) > MAX_TAGS:
        raise UsageError(
            f"{existing} tag(s) already there + {len(tags)} new: EC2 allows {MAX_TAGS} per resource"
        )
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
    validate_tags(tags, existing=len(image.tag_keys - set(tags)))
    call(
        ec2.create_tags,
        Resources=[image.image_id, *image.snapshots],
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )


def knows(client: Any, operation: str, parameter: str) -> bool:
    """Whether the installed botocore's model of ``operation`` has ``parameter``."""
    return parameter in client.meta.service_model.operation_model(operation).input_shape.members


def act_on_failure(ec2: Any, image: ImageInfo, action: str) -> str:
    """--on-fail: deregister (and delete its snapshots) or deprecate now; returns what was done.

    Only an AMI this account owns (``DescribeImages`` with ``Owners=["self"]``), and of its snapshots
    only those in its own ``BlockDeviceMappings`` (as described now) that this account owns: anything
    else is refused and named in the line, never deleted (a shared AMI, a snapshot of another account).
    deregister: ``DeregisterImage`` with ``DeleteAssociatedSnapshots`` (when the installed botocore
    knows it: >= 1.38.30), then each of those snapshots is deleted explicitly too (an older
    botocore, or an endpoint that ignores the flag; one already gone is fine);
    a snapshot another AMI still uses (``InvalidSnapshot.InUse``) is kept and named in the line.
    deprecate: ``EnableImageDeprecation`` two minutes from now. A failing call is an
    :class:`AwsError` (one line with the API and the error code, exit 3).
    """
    if action not in ("deregister", "deprecate"):
        return ""
    owned = call(ec2.describe_images, ImageIds=[image.image_id], Owners=["self"]).get("Images", [])
    if not owned:
        return (
            f"--on-fail {action} refused: {image.image_id} is not owned by this account "
            "(a shared or public AMI); nothing was changed"
        )
    if action == "deregister":
        snapshots, foreign = _own_snapshots(ec2, owned[0])
        # DeleteAssociatedSnapshots exists in botocore >= 1.38.30 only; an older botocore refuses the
        # parameter client-side. Rather than raise the boto3 floor (distributions ship older ones),
        # send it when the installed model has it; the explicit deletion below covers both cases.
        flag = (
            {"DeleteAssociatedSnapshots": True}
            if knows(ec2, "DeregisterImage", "DeleteAssociatedSnapshots")
            else {}
        )
        call(ec2.deregister_image, ImageId=image.image_id, **flag)
        done = f"deregistered {image.image_id}; {_delete_snapshots(ec2, snapshots)}"
        return done + (
            f"; refused to delete {', '.join(foreign)} (not owned by this account)" if foreign else ""
        )
    from datetime import UTC, datetime, timedelta

    at = (datetime.now(UTC) + timedelta(minutes=2)).replace(second=0, microsecond=0)
    call(ec2.enable_image_deprecation, ImageId=image.image_id, DeprecateAt=at)
    return f"{image.image_id} deprecated from {at:%Y-%m-%dT%H:%MZ}"


def _own_snapshots(ec2: Any, image: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The snapshots of ``image``'s own BlockDeviceMappings, split into those its owner (this
    account) owns and the others."""
    ids = mapped_snapshots(image)
    from imagelint.aws.kms import describe_snapshot

    owners = {i: (describe_snapshot(ec2, i) or {}).get("OwnerId") for i in ids}  # None: not visible
    mine = [i for i in ids if owners[i] == image.get("OwnerId")]
    return mine, [i for i in ids if i not in mine]


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
