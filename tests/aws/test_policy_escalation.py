"""The runner's printed policy holds against privilege escalation (issue 48, item 1).

Each chain is the sequence of IAM requests an attacker holding the runner's credentials would make,
evaluated step by step against the generated policy (``imagelint ami policies``, placeholders filled)
with :mod:`tests.aws.iam_eval`; the test names the step that must be refused. What is allowed is
the documented run role only: created under the run's namespace with the permissions boundary and
the run's tags, given AmazonSSMManagedInstanceCore and nothing else, passed only to EC2; volumes and
instances only the run's.
"""

from __future__ import annotations

import pytest

from imagelint.aws import policy
from imagelint.aws.policy_fill import Fill, documents
from tests.aws.iam_eval import ACCOUNT, REGION, Request, allowed_by

FILL = Fill(
    report_bucket="reports",
    account=ACCOUNT,
    candidate_tag="stage=candidate",
    fleet_tag="Role=web",
    role_arn=f"arn:aws:iam::{ACCOUNT}:role/imagelint",
    instance_role="ssm-instance",
)
RUNNER = documents(values=FILL)["runner"]
SSM = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
ADMIN = "arn:aws:iam::aws:policy/AdministratorAccess"
RUN_ROLE = f"arn:aws:iam::{ACCOUNT}:role/imagelint/imagelint-r1"
RUN_PROFILE = f"arn:aws:iam::{ACCOUNT}:instance-profile/imagelint/imagelint-r1"
LOOK_ALIKE = f"arn:aws:iam::{ACCOUNT}:role/imagelint/imagelint-ssm-prod"  # a user's own role
RUN_TAGS = {
    "aws:RequestTag/imagelint:run": "r1",
    "aws:RequestTag/imagelint:deadline": "2026-12-06T05:00:00Z",
    "aws:TagKeys": ["Name", "imagelint:run", "imagelint:deadline"],
}
ON_RUN_ROLE = {"aws:ResourceTag/imagelint:run": "r1", "iam:PermissionsBoundary": SSM}
INSTANCE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0123456789abcdef0"
RUNNER_INSTANCE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0aaaaaaaaaaaaaaaa"
VOLUME = f"arn:aws:ec2:{REGION}:{ACCOUNT}:volume/vol-0123456789abcdef0"
SNAPSHOT = f"arn:aws:ec2:{REGION}::snapshot/snap-0123456789abcdef0"
CANDIDATE = {"ec2:Owner": ACCOUNT, "aws:ResourceTag/stage": "candidate"}
FROM_RUNNER = {"ec2:SourceInstanceARN": RUNNER_INSTANCE}


def _create_role(boundary: str | None = SSM, arn: str = RUN_ROLE) -> list[Request]:
    context = dict(RUN_TAGS) | ({"iam:PermissionsBoundary": boundary} if boundary else {})
    return [Request("iam:CreateRole", arn, context), Request("iam:TagRole", arn, RUN_TAGS)]


def _launch_with(role: str, role_tags: dict[str, str]) -> list[Request]:
    """Make a run profile holding ``role``, pass it to EC2, launch a run instance, send it a command."""
    passed = {"iam:PassedToService": "ec2.amazonaws.com", **role_tags}
    return [
        Request("iam:CreateInstanceProfile", RUN_PROFILE, RUN_TAGS),
        Request("iam:TagInstanceProfile", RUN_PROFILE, RUN_TAGS),
        Request("iam:AddRoleToInstanceProfile", RUN_PROFILE, {"aws:ResourceTag/imagelint:run": "r1"}),
        Request("iam:PassRole", role, passed),
        Request("ec2:RunInstances", INSTANCE, {"aws:RequestTag/imagelint:run": "r1"}),
        Request("ssm:SendCommand", INSTANCE, {"ssm:resourceTag/imagelint:run": "r1"}),
    ]


def _attach(policy_arn: str, role: str = RUN_ROLE, on: dict[str, str] = ON_RUN_ROLE) -> Request:
    return Request("iam:AttachRolePolicy", role, {**on, "iam:PolicyARN": policy_arn})


# chain → (its requests in order, the index of the step the policy must refuse)
CHAINS: dict[str, tuple[list[Request], int]] = {
    "a role given AdministratorAccess, passed to a run instance": (
        [*_create_role(), _attach(ADMIN), *_launch_with(RUN_ROLE, {"aws:ResourceTag/imagelint:run": "r1"})],
        2,
    ),
    "a role created without the boundary (any trust policy)": (_create_role(boundary=None), 0),
    "a role whose boundary is AdministratorAccess": (_create_role(boundary=ADMIN), 0),
    "a role created outside the run's namespace": (_create_role(arn=f"arn:aws:iam::{ACCOUNT}:role/admin"), 0),
    "an inline policy on the run role": (
        [*_create_role(), Request("iam:PutRolePolicy", RUN_ROLE, ON_RUN_ROLE)],
        2,
    ),
    "the SSM policy attached to an unbounded role in the namespace": ([_attach(SSM, LOOK_ALIKE, {})], 0),
    "the run role's boundary removed, then AdministratorAccess attached": (
        [Request("iam:DeleteRolePermissionsBoundary", RUN_ROLE, ON_RUN_ROLE), _attach(ADMIN)],
        0,
    ),
    "the run role's trust policy rewritten for another account": (
        [Request("iam:UpdateAssumeRolePolicy", RUN_ROLE, ON_RUN_ROLE)],
        0,
    ),
    "a new policy version of a customer policy": (
        [Request("iam:CreatePolicyVersion", f"arn:aws:iam::{ACCOUNT}:policy/boundary", {})],
        0,
    ),
    "a user's role in the namespace passed to a run instance": (_launch_with(LOOK_ALIKE, {}), 3),
    "another role passed to a run instance": (_launch_with(f"arn:aws:iam::{ACCOUNT}:role/admin", {}), 3),
    "the run role passed to another service": (
        [Request("iam:PassRole", RUN_ROLE, {"iam:PassedToService": "lambda.amazonaws.com", **ON_RUN_ROLE})],
        0,
    ),
    "a user's role in the namespace stripped and deleted": (
        [
            Request("iam:DetachRolePolicy", LOOK_ALIKE, {"iam:PolicyARN": SSM}),
            Request("iam:DeleteRolePolicy", LOOK_ALIKE, {}),
            Request("iam:DeleteRole", LOOK_ALIKE, {}),
        ],
        0,
    ),
    "a volume from another snapshot, attached to the runner": (
        [
            Request("ec2:CreateVolume", SNAPSHOT, {"ec2:Owner": ACCOUNT, "aws:ResourceTag/backup": "db"}),
            Request("ec2:CreateVolume", VOLUME, {"aws:RequestTag/imagelint:run": "r1"}),
            Request("ec2:AttachVolume", VOLUME, {"aws:ResourceTag/imagelint:run": "r1", **FROM_RUNNER}),
            Request("ec2:AttachVolume", RUNNER_INSTANCE, {"aws:ARN": RUNNER_INSTANCE, **FROM_RUNNER}),
        ],
        0,
    ),
    "a run volume attached to an instance that is not the run's nor the runner": (
        [
            Request("ec2:AttachVolume", VOLUME, {"aws:ResourceTag/imagelint:run": "r1"}),
            Request("ec2:AttachVolume", INSTANCE, {"aws:ARN": INSTANCE, **FROM_RUNNER}),
        ],
        1,
    ),
    "a user's volume attached to the runner": (
        [
            Request("ec2:AttachVolume", VOLUME, {"aws:ResourceTag/Name": "db-data", **FROM_RUNNER}),
            Request("ec2:AttachVolume", RUNNER_INSTANCE, {"aws:ARN": RUNNER_INSTANCE, **FROM_RUNNER}),
        ],
        0,
    ),
    "a user's volume detached from its instance": (
        [Request("ec2:DetachVolume", VOLUME, {"aws:ResourceTag/Name": "db-data"})],
        0,
    ),
    "an existing user resource tagged as the run's": (
        [Request("ec2:CreateTags", VOLUME, {"aws:RequestTag/imagelint:run": "r1"})],
        0,
    ),
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_each_escalation_chain_is_refused_at_its_step(name: str) -> None:
    steps, refused = CHAINS[name]
    verdicts = [bool(allowed_by(RUNNER, request)) for request in steps]
    assert verdicts[:refused] == [True] * refused, f"an earlier step is refused already: {verdicts}"
    assert not verdicts[refused], f"allowed by {allowed_by(RUNNER, steps[refused])}: {steps[refused]}"


def test_the_documented_run_role_and_volume_mode_are_allowed() -> None:
    """The same evaluator allows what a run does: the run role made exactly as documented, launched,
    and volume mode's volume from a candidate snapshot attached to the runner's own instance."""
    run_role = [
        *_create_role(),
        _attach(SSM),
        *_launch_with(RUN_ROLE, {"aws:ResourceTag/imagelint:run": "r1"}),
    ]
    volume = [
        Request("ec2:CreateVolume", SNAPSHOT, CANDIDATE),
        Request("ec2:CreateVolume", VOLUME, {"aws:RequestTag/imagelint:run": "r1"}),
        Request("ec2:AttachVolume", VOLUME, {"aws:ResourceTag/imagelint:run": "r1", **FROM_RUNNER}),
        Request("ec2:AttachVolume", RUNNER_INSTANCE, {"aws:ARN": RUNNER_INSTANCE, **FROM_RUNNER}),
        Request("ec2:DetachVolume", VOLUME, {"aws:ResourceTag/imagelint:run": "r1"}),
        Request("ec2:DetachVolume", RUNNER_INSTANCE, {"aws:ARN": RUNNER_INSTANCE, **FROM_RUNNER}),
    ]
    for request in run_role + volume:
        assert allowed_by(RUNNER, request), request


def test_the_boundary_is_required_by_default() -> None:
    """Every statement allowing CreateRole or AttachRolePolicy names the boundary (by default the
    AWS managed policy the run role is given, so the role can never hold more than it)."""
    for statement in policy.runner_policy()["Statement"]:
        if {"iam:CreateRole", "iam:AttachRolePolicy"} & set(statement["Action"]):
            conditions = {k: v for test in statement["Condition"].values() for k, v in test.items()}
            assert conditions["iam:PermissionsBoundary"] == policy.SSM_MANAGED_POLICY, statement


def test_the_policy_follows_a_chosen_namespace() -> None:
    """`ami policies --profile-namespace /ci/images/img-`: the run role is allowed there and only
    there (the default namespace is then refused too)."""
    import dataclasses

    moved = documents(values=dataclasses.replace(FILL, namespace="/ci/images/img-"))["runner"]
    there = f"arn:aws:iam::{ACCOUNT}:role/ci/images/img-r1"
    profile = f"arn:aws:iam::{ACCOUNT}:instance-profile/ci/images/img-r1"
    assert all(allowed_by(moved, r) for r in _create_role(arn=there))
    assert allowed_by(moved, Request("iam:CreateInstanceProfile", profile, RUN_TAGS))
    assert allowed_by(moved, _attach(SSM, there))
    assert not allowed_by(moved, _create_role()[0])  # /imagelint/imagelint-r1
    assert not allowed_by(moved, _create_role(arn=f"arn:aws:iam::{ACCOUNT}:role/ci/images/other-r1")[0])


@pytest.mark.parametrize("given", ["imagelint-", "/imagelint/", "/a/b*/x-", "/a/" + "p" * 28])
def test_a_malformed_namespace_is_refused(given: str) -> None:
    from imagelint.errors import UsageError

    with pytest.raises(UsageError, match="--profile-namespace"):
        documents(values=Fill(namespace=given))
