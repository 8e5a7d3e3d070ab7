"""``--create-profile``: an IAM role and instance profile made for one `imagelint ami` run.

For accounts where nobody made an SSM instance profile beforehand: the run creates the role
``imagelint-<run id>`` (path ``/imagelint/``, trusted by ``ec2.amazonaws.com``) with the AWS managed
policy ``AmazonSSMManagedInstanceCore`` only (no S3 permission: the instance uploads through its
presigned URL), and an instance profile of the same name and path holding it. Both always carry the
run tag and the deadline tag (:func:`imagelint.aws.ec2.run_tags`; and the ``--resource-tag`` tags)
from their create calls, and the role always has a permissions boundary: by default
AmazonSSMManagedInstanceCore itself, so the role can never do more than the SSM agent needs (the
runner's policy allows CreateRole only so: :mod:`imagelint.aws.policy`); ``--permissions-boundary``
names another (it must allow what AmazonSSMManagedInstanceCore grants, or the SSM agent never
registers). (Roles of earlier versions also had an inline policy, ``imagelint-ssm-output``: their
removal still deletes it.) Both go once the instance is terminated, on every path; the names are the
run's, so the removal needs no reply from the create calls, and ``imagelint ami cleanup`` finds the
roles a killed run left under the path (``ListRoles``), reads each one's tags (``GetRole``) and
removes only a role (and profile) that carries the run tag matching its name and a deadline in the
past: a role of the user's own that looks like a run's is left alone
(:func:`imagelint.aws.cleanup.owned`).

IAM is eventually consistent: for some seconds after its creation an instance profile is unknown
to EC2, and ``RunInstances`` answers ``InvalidParameterValue`` (``Invalid IAM Instance Profile``).
:func:`launch_retrying` retries exactly that answer, a bounded number of times with backoff.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from imagelint.aws.ec2 import run_tags
from imagelint.aws.errors import AwsError, call, paginate
from imagelint.aws.policy import INSTANCE_TRUST, Namespace, managed_policy_arn

PATH = "/imagelint/"  # the default namespace's (policy.Namespace)
PREFIX = "imagelint-"
INLINE = "imagelint-ssm-output"  # the inline policy of roles made by earlier versions (removed if there)
PROFILE_TRIES = 8  # about a minute at the default poll: 1, 2, 4, 8, 15, 15, 15 × (poll / 5) s
T = TypeVar("T")


def profile_name(run_id: str, namespace: Namespace | None = None) -> str:
    return (namespace or Namespace()).name(run_id)


def create_run_profile(
    iam: Any,
    run_id: str,
    *,
    tags: tuple[tuple[str, str], ...] = (),
    boundary: str | None = None,
    deadline: str = "",
    namespace: Namespace | None = None,
) -> str:
    """The run's role and instance profile; returns the profile's name. Both carry the run tag, the
    ``deadline`` (:func:`imagelint.aws.ec2.run_tags`) and ``tags`` (``--resource-tag``), in the
    create calls (IAM then also checks iam:TagRole and iam:TagInstanceProfile); ``boundary``
    (``--permissions-boundary``; by default AmazonSSMManagedInstanceCore) is the role's permissions
    boundary. ``namespace`` (``--profile-namespace``): their path and name prefix."""
    where = namespace or Namespace()
    name = where.name(run_id)
    tagged = {"Tags": run_tags(run_id, resource=tags, deadline=deadline)}
    bounded = {"PermissionsBoundary": boundary or managed_policy_arn(iam.meta.partition)}
    call(
        iam.create_role,
        RoleName=name,
        Path=where.path,
        AssumeRolePolicyDocument=json.dumps(INSTANCE_TRUST),
        Description=f"imagelint run {run_id}: deleted at the end of the run",
        **tagged,
        **bounded,
    )
    call(iam.attach_role_policy, RoleName=name, PolicyArn=managed_policy_arn(iam.meta.partition))
    call(iam.create_instance_profile, InstanceProfileName=name, Path=where.path, **tagged)
    call(iam.add_role_to_instance_profile, InstanceProfileName=name, RoleName=name)
    return name


def launch_retrying(launch: Callable[[], T], *, poll: float, tries: int = PROFILE_TRIES) -> T:
    """``launch()`` (a RunInstances), retrying the answer a profile too new for EC2 gets."""
    unit = max(0.05, poll) / 5
    for attempt in range(tries):
        try:
            return launch()
        except AwsError as exc:
            new = exc.code == "InvalidParameterValue" and "Invalid IAM Instance Profile" in exc.detail
            if not new or attempt == tries - 1:
                raise
            time.sleep(min(2**attempt, 15) * unit)
    raise AssertionError("unreachable")


def remove_run_profile(iam: Any, name: str, *, profile: bool = True) -> list[str]:
    """Remove the profile (unless not ``profile``: not the run's) and role ``name``, each step
    tolerant of what is already gone (a create that failed half-way, a lost reply) and run whatever
    became of the others (a refused DeleteInstanceProfile still lets the role go); returns what was
    removed, or raises the first error once every step ran."""
    removed: list[str] = []
    errors: list[AwsError] = []

    def step(func: Callable[..., Any], what: str = "", **kwargs: Any) -> None:
        try:
            call(func, **kwargs)
        except AwsError as exc:
            if exc.code != "NoSuchEntity":
                errors.append(exc)
            return
        if what:
            removed.append(what)

    if profile:
        step(iam.remove_role_from_instance_profile, InstanceProfileName=name, RoleName=name)
        step(iam.delete_instance_profile, f"instance profile {name}", InstanceProfileName=name)
    step(iam.detach_role_policy, RoleName=name, PolicyArn=managed_policy_arn(iam.meta.partition))
    step(iam.delete_role_policy, RoleName=name, PolicyName=INLINE)
    step(iam.delete_role, f"role {name}", RoleName=name)
    if errors:
        raise errors[0]
    return removed


def run_roles(iam: Any, namespace: Namespace | None = None) -> list[dict[str, Any]]:
    """Every role that may be a run's (under the namespace's path, named with its prefix; created before
    its profile), with its ``CreateDate``: candidates only, their tags decide
    (:func:`imagelint.aws.cleanup.owned`). The path and name
    are checked here too (an endpoint that ignores ``PathPrefix``, as moto does, must not get another
    role removed)."""
    where = namespace or Namespace()
    roles = paginate(iam, "list_roles", "Roles", PathPrefix=where.path)
    return [
        r
        for r in roles
        if r.get("Path") == where.path and str(r.get("RoleName", "")).startswith(where.prefix)
    ]
