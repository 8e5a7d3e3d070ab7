"""`imagelint ami cleanup`: find what earlier runs left behind (by the ``imagelint:run`` tag) and remove it.

A run removes its own instances and volumes in every outcome it lives through; this sweeper covers
the ones it did not (the runner itself was killed with SIGKILL, lost its network, ran out of time).
Only resources older than ``--older-than`` are touched, so runs in progress are left alone. Every
listing is paginated (an account with many leftovers answers in pages). Security groups of runs
(:mod:`imagelint.aws.run_group`) go last, after the instances that held them; their age is their
``imagelint:created`` tag (EC2 records none), and one without it is left alone; then the roles and
instance profiles of ``--create-profile`` runs (:mod:`imagelint.aws.run_profile`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from imagelint.aws import credentials, run_group, run_profile
from imagelint.aws import ec2 as ec2_ops
from imagelint.aws.clients import Clients, default_region
from imagelint.aws.errors import paginate


def run_cleanup(
    region: str | None, older_than: float, *, dry_run: bool, poll: float = 5.0, role_arn: str | None = None
) -> list[str]:
    """Terminate orphaned instances, delete orphaned volumes, security groups, roles and instance
    profiles; returns one line per resource."""
    name = default_region(region)
    clients = Clients(name, credentials.run_session(role_arn, 0, name))
    cutoff = datetime.now(UTC) - timedelta(seconds=older_than)
    lines: list[str] = []
    reservations = paginate(
        clients.ec2,
        "describe_instances",
        "Reservations",
        Filters=[
            {"Name": "tag-key", "Values": [ec2_ops.RUN_TAG]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
        ],
    )
    instances = [
        (i["InstanceId"], _run(i.get("Tags", [])))
        for i in ec2_ops.instances_of(reservations)
        if i["LaunchTime"] <= cutoff
    ]
    verb = "would terminate" if dry_run else "terminated"
    if instances and not dry_run:
        ec2_ops.terminate_instances(clients.ec2, [i for i, _ in instances], poll=poll)
    lines += [f"{verb} {iid} (run {run})" for iid, run in instances]
    volumes = paginate(
        clients.ec2, "describe_volumes", "Volumes", Filters=[{"Name": "tag-key", "Values": [ec2_ops.RUN_TAG]}]
    )
    for volume in volumes:
        if volume["CreateTime"] > cutoff or volume["State"] in ("deleting", "deleted"):
            continue
        if not dry_run:
            ec2_ops.remove_volume(clients.ec2, volume["VolumeId"], poll=poll, force=True)
        lines.append(
            f"{'would delete' if dry_run else 'deleted'} {volume['VolumeId']} "
            f"(run {_run(volume.get('Tags', []))})"
        )
    return lines + _groups(clients, cutoff, dry_run=dry_run, poll=poll) + _profiles(clients, cutoff, dry_run)


def _profiles(clients: Clients, cutoff: datetime, dry_run: bool) -> list[str]:
    """Roles and instance profiles of --create-profile runs (path /imagelint/)."""
    iam = clients.get("iam")
    lines: list[str] = []
    for role in run_profile.run_roles(iam):
        if role["CreateDate"] > cutoff:
            continue
        if dry_run:
            lines.append(f"would delete role and instance profile {role['RoleName']}")
            continue
        lines += [f"deleted {what}" for what in run_profile.remove_run_profile(iam, role["RoleName"])]
    return lines


def _groups(clients: Clients, cutoff: datetime, *, dry_run: bool, poll: float) -> list[str]:
    lines: list[str] = []
    for group in run_group.run_groups(clients.ec2):
        tags = group.get("Tags", [])
        created = next((t["Value"] for t in tags if t["Key"] == run_group.CREATED_TAG), "")
        try:
            when = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            continue  # not made by a run (or its tag was changed): its age is unknown
        if when > cutoff:
            continue
        run = _run(tags)
        if dry_run:
            lines.append(f"would delete security group {group['GroupId']} (run {run})")
        elif run_group.delete_group(clients.ec2, group["GroupId"], poll=poll):
            lines.append(f"deleted security group {group['GroupId']} (run {run})")
        else:
            lines.append(f"kept security group {group['GroupId']} (run {run}): still in use")
    return lines


def _run(tags: list[dict[str, str]]) -> str:
    return next((t["Value"] for t in tags if t["Key"] == ec2_ops.RUN_TAG), "?")
