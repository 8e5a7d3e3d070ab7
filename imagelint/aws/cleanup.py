"""`imagelint ami cleanup`: find what earlier runs left behind (by the ``imagelint:run`` tag) and remove it.

A run removes its own instances and volumes in every outcome it lives through; this sweeper covers
the ones it did not (the runner itself was killed with SIGKILL, lost its network, ran out of time).
Only resources older than ``--older-than`` are touched, so runs in progress are left alone. Every
listing is paginated (an account with many leftovers answers in pages). Security groups of runs
(:mod:`imagelint.aws.run_group`) go last, after the instances that held them; their age is their
``imagelint:created`` tag (EC2 records none), and one without it is left alone; then the roles and
instance profiles of ``--create-profile`` runs (:mod:`imagelint.aws.run_profile`). Each removal is a
step of its own (:class:`imagelint.aws.teardown.Teardown`): throttling is ridden out, a failed step
is a warning and the others still run; the caller ends with exit 3 when one failed.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

from imagelint import stderr
from imagelint.aws import credentials, run_group, run_profile
from imagelint.aws import ec2 as ec2_ops
from imagelint.aws.clients import Clients, default_region
from imagelint.aws.errors import paginate
from imagelint.aws.teardown import Teardown


def run_cleanup(
    region: str | None,
    older_than: float,
    *,
    dry_run: bool,
    poll: float = 5.0,
    role_arn: str | None = None,
    teardown: Teardown | None = None,
) -> list[str]:
    """Terminate orphaned instances, delete orphaned volumes, security groups, roles and instance
    profiles, each a step of ``teardown`` (its ``failures`` say what failed); returns one line per
    resource removed (or that would be)."""
    steps = teardown or Teardown(stderr.warning, first=min(1.0, poll))
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
    ids = [i for i, _ in instances]
    if (
        not ids
        or dry_run
        or steps.step(
            f"terminate {', '.join(ids)}", lambda: ec2_ops.terminate_instances(clients.ec2, ids, poll=poll)
        )
    ):
        lines += [f"{verb} {iid} (run {run})" for iid, run in instances]
    volumes: list[dict[str, Any]] = []
    steps.step(
        "list the runs' volumes",
        lambda: volumes.extend(
            paginate(
                clients.ec2,
                "describe_volumes",
                "Volumes",
                Filters=[{"Name": "tag-key", "Values": [ec2_ops.RUN_TAG]}],
            )
        ),
    )
    for volume in volumes:
        if volume["CreateTime"] > cutoff or volume["State"] in ("deleting", "deleted"):
            continue
        volume_id = volume["VolumeId"]
        if dry_run or steps.step(
            f"delete {volume_id}",
            functools.partial(ec2_ops.remove_volume, clients.ec2, volume_id, poll=poll, force=True),
        ):
            lines.append(
                f"{'would delete' if dry_run else 'deleted'} {volume_id} (run {_run(volume.get('Tags', []))})"
            )
    lines += _groups(clients, cutoff, steps, dry_run=dry_run, poll=poll)
    return lines + _profiles(clients, cutoff, steps, dry_run)


def _profiles(clients: Clients, cutoff: datetime, steps: Teardown, dry_run: bool) -> list[str]:
    """Roles and instance profiles of --create-profile runs (path /imagelint/)."""
    iam = clients.get("iam")
    lines: list[str] = []
    roles: list[dict[str, Any]] = []
    steps.step("list the runs' roles", lambda: roles.extend(run_profile.run_roles(iam)))
    for role in roles:
        if role["CreateDate"] > cutoff:
            continue
        if dry_run:
            lines.append(f"would delete role and instance profile {role['RoleName']}")
            continue
        lines += [f"deleted {what}" for what in _remove_role(steps, iam, role["RoleName"])]
    return lines


def _groups(clients: Clients, cutoff: datetime, steps: Teardown, *, dry_run: bool, poll: float) -> list[str]:
    lines: list[str] = []
    groups: list[dict[str, Any]] = []
    steps.step("list the runs' security groups", lambda: groups.extend(run_group.run_groups(clients.ec2)))
    for group in groups:
        tags = group.get("Tags", [])
        created = next((t["Value"] for t in tags if t["Key"] == run_group.CREATED_TAG), "")
        try:
            when = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            continue  # not made by a run (or its tag was changed): its age is unknown
        if when > cutoff:
            continue
        run = _run(tags)
        group_id = group["GroupId"]
        if dry_run:
            lines.append(f"would delete security group {group_id} (run {run})")
            continue
        outcome = _delete_group(steps, clients, group_id, poll)
        if outcome is not None:
            lines.append(
                f"deleted security group {group_id} (run {run})"
                if outcome
                else f"kept security group {group_id} (run {run}): still in use"
            )
    return lines


def _remove_role(steps: Teardown, iam: Any, name: str) -> list[str]:
    """Remove one run's role and instance profile as a step; what was removed."""
    removed: list[str] = []
    steps.step(
        f"remove role and instance profile {name}",
        lambda: removed.extend(run_profile.remove_run_profile(iam, name)),
    )
    return removed


def _delete_group(steps: Teardown, clients: Clients, group_id: str, poll: float) -> bool | None:
    """Delete one run's security group as a step: deleted, still in use (False), or failed (None)."""
    outcome: list[bool] = []
    steps.step(
        f"delete security group {group_id}",
        lambda: outcome.append(run_group.delete_group(clients.ec2, group_id, poll=poll)),
    )
    return outcome[-1] if outcome else None


def _run(tags: list[dict[str, str]]) -> str:
    return next((t["Value"] for t in tags if t["Key"] == ec2_ops.RUN_TAG), "?")
