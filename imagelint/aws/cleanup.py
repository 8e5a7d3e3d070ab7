"""`imagelint ami cleanup`: find what earlier runs left behind (by the ``imagelint:run`` tag) and remove it.

A run removes its own instances and volumes in every outcome it lives through; this sweeper covers
the ones it did not (the runner itself was killed with SIGKILL, lost its network, ran out of time).
Ownership is proved before anything goes (:func:`owned`): a resource is removed only when it carries
the run tag and the deadline tag every run writes on everything it creates
(:func:`imagelint.aws.ec2.run_tags`) and that deadline is past. The deadline is the resource's
creation plus the run's planned length (the soak included) and a margin, so a run in progress is
never touched, however long its soak and whatever ``--older-than`` says; ``--older-than`` stays an
extra guard on top (a resource younger than it stays too). A role or profile must also carry the run
tag its name was made from: a user's own ``/imagelint/imagelint-...`` role that looks like a run's
stays. Every listing is paginated (an account with many leftovers answers in pages). Security groups
of runs (:mod:`imagelint.aws.run_group`) go after the instances that held them; then the roles and
instance profiles of ``--create-profile`` runs (:mod:`imagelint.aws.run_profile`), whose tags are
read one by one (``GetRole``, ``GetInstanceProfile``: ``ListRoles`` answers none). Each removal is a
step of its own (:class:`imagelint.aws.teardown.Teardown`): throttling is ridden out, a failed step
is a warning and the others still run; the caller ends with exit 3 when one failed.
"""

from __future__ import annotations

import functools
from dataclasses import field
from datetime import UTC, datetime, timedelta
from typing import Any

from imagelint import stderr
from imagelint.aws import credentials, run_group, run_profile
from imagelint.aws import ec2 as ec2_ops
from imagelint.aws.clients import Clients, default_region
from imagelint.aws.errors import AwsError, call, paginate
from imagelint.aws.policy import Namespace
from imagelint.aws.teardown import Teardown
from imagelint.records import dataclass


def run_cleanup(
    region: str | None,
    older_than: float,
    *,
    dry_run: bool,
    poll: float = 5.0,
    role_arn: str | None = None,
    teardown: Teardown | None = None,
    run: str | None = None,
    namespace: Namespace | None = None,
) -> list[str]:
    """Terminate orphaned instances, delete orphaned volumes, security groups, roles and instance
    profiles (each proved a run's and past its deadline, or of ``run``: :class:`Sweep`), each a step
    of ``teardown`` (its ``failures`` say what failed); returns one line per resource removed (or
    that would be)."""
    steps = teardown or Teardown(stderr.warning, first=min(1.0, poll))
    name = default_region(region)
    clients = Clients(name, credentials.run_session(role_arn, 0, name))
    now = datetime.now(UTC)
    sweep = Sweep(now, now - timedelta(seconds=older_than), run, namespace or Namespace())
    cutoff = sweep.cutoff
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
        (i["InstanceId"], owner)
        for i in ec2_ops.instances_of(reservations)
        if i["LaunchTime"] <= cutoff and (owner := sweep.owned(i.get("Tags", [])))
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
        run = sweep.owned(volume.get("Tags", []))
        if not run or volume["CreateTime"] > cutoff or volume["State"] in ("deleting", "deleted"):
            continue
        volume_id = volume["VolumeId"]
        if dry_run or steps.step(
            f"delete {volume_id}",
            functools.partial(ec2_ops.remove_volume, clients.ec2, volume_id, poll=poll, force=True),
        ):
            lines.append(f"{'would delete' if dry_run else 'deleted'} {volume_id} (run {run})")
    lines += _groups(clients, sweep, steps, dry_run=dry_run, poll=poll)
    return lines + _profiles(clients, sweep, steps, dry_run)


@dataclass(frozen=True)
class Sweep:
    """Which resources a cleanup may remove: those past their deadline at ``now`` (and created before
    ``cutoff``, ``--older-than``'s extra guard), or with ``run`` (``--run``) that run's whatever its
    deadline (the user knows it is dead: its runner was killed)."""

    now: datetime
    cutoff: datetime
    run: str | None = None
    namespace: Namespace = field(default_factory=Namespace)  # --profile-namespace: the roles and profiles

    def owned(self, tags: list[dict[str, str]], name: str | None = None) -> str | None:
        """The run id when ``tags`` prove a run made the resource and it may go now: the run tag (the
        one ``name``, a role's or profile's, was made from, when given) and a deadline tag, past
        unless the run is the one named; None for anything else (a look-alike, an earlier version's
        resource, a run in progress)."""
        found = {t.get("Key"): t.get("Value", "") for t in tags}
        run = found.get(ec2_ops.RUN_TAG)
        deadline = ec2_ops.parse_deadline(str(found.get(ec2_ops.DEADLINE_TAG)))
        if not run or deadline is None or (self.run is not None and run != self.run):
            return None
        if self.run is None and deadline > self.now:
            return None
        if name is not None and name != self.namespace.name(run):
            return None
        return run


def _profiles(clients: Clients, sweep: Sweep, steps: Teardown, dry_run: bool) -> list[str]:
    """Roles and instance profiles of --create-profile runs (path /imagelint/), each proved the run's."""
    iam = clients.get("iam")
    lines: list[str] = []
    roles: list[dict[str, Any]] = []
    steps.step("list the runs' roles", lambda: roles.extend(run_profile.run_roles(iam, sweep.namespace)))
    for role in roles:
        name = role["RoleName"]
        if role["CreateDate"] > sweep.cutoff:
            continue
        read: dict[str, list[dict[str, str]] | None] = {}
        for kind in ("role", "instance profile"):
            steps.step(
                f"read the tags of {kind} {name}", functools.partial(_read_tags, read, iam, kind, name)
            )
        if not sweep.owned(read.get("role") or [], name):
            continue
        profile = sweep.owned(read.get("instance profile") or [], name) is not None
        if dry_run:
            what = "role and instance profile" if profile else "role"
            lines.append(f"would delete {what} {name}")
            continue
        lines += [f"deleted {what}" for what in _remove_role(steps, iam, name, profile=profile)]
    return lines


def _read_tags(into: dict[str, list[dict[str, str]] | None], iam: Any, kind: str, name: str) -> None:
    """A role's or instance profile's tags into ``into[kind]`` (None: it does not exist)."""
    try:
        if kind == "role":
            into[kind] = list(call(iam.get_role, RoleName=name)["Role"].get("Tags", []))
        else:
            reply = call(iam.get_instance_profile, InstanceProfileName=name)
            into[kind] = list(reply["InstanceProfile"].get("Tags", []))
    except AwsError as exc:
        if exc.code != "NoSuchEntity":
            raise
        into[kind] = None


def _groups(clients: Clients, sweep: Sweep, steps: Teardown, *, dry_run: bool, poll: float) -> list[str]:
    lines: list[str] = []
    groups: list[dict[str, Any]] = []
    steps.step("list the runs' security groups", lambda: groups.extend(run_group.run_groups(clients.ec2)))
    for group in groups:
        run = sweep.owned(group.get("Tags", []))
        if not run:
            continue  # not proved a run's, or its run may still be going (EC2 records no creation time)
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


def _remove_role(steps: Teardown, iam: Any, name: str, *, profile: bool) -> list[str]:
    """Remove one run's role (and instance profile, when it is the run's too) as a step; what was
    removed."""
    removed: list[str] = []
    steps.step(
        f"remove role and instance profile {name}",
        lambda: removed.extend(run_profile.remove_run_profile(iam, name, profile=profile)),
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
