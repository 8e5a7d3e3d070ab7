"""The IAM policies `imagelint ami` / `fleet` need, as JSON a user can paste (README and ``--help``).

Two identities:

- **the runner** (the CI job or workstation running imagelint): :data:`RUNNER_ACTIONS`. It signs the
  presigned URLs the instance uses, so the instance's uploads and downloads are authorised as the
  runner's ``s3:PutObject`` / ``s3:GetObject``. ``HeadBucket`` is authorised as ``s3:ListBucket``,
  which also makes a missing key answer 404 rather than 403. ``iam:PassRole`` lets ``RunInstances``
  give the instance its profile's role. ``ImagelintNetwork`` reads the launch subnet's route table and
  the VPC's endpoints (:mod:`imagelint.aws.network`) and makes the run's security group
  (:mod:`imagelint.aws.run_group`; ``ec2:CreateTags`` tags it on creation). ``ImagelintRunProfile``
  is needed only with ``--create-profile`` (:mod:`imagelint.aws.run_profile`); it lets the
  runner create roles, so leave it out, or narrow its Resource to ``arn:aws:iam::ACCOUNT:role/imagelint/*``
  and ``…:instance-profile/imagelint/*``, where that matters.
- **the instance profile's role** (launch mode): ``AmazonSSMManagedInstanceCore`` (attach the AWS
  managed policy) plus ``s3:PutObject`` under the report prefix, where the SSM agent writes the
  command's output (``OutputS3BucketName``).

``tests/aws/test_policy.py`` runs every flow against moto, records each API call and each URL the
code signs, and checks that all are in :data:`RUNNER_ACTIONS`.
"""

from __future__ import annotations

import json
from typing import Any

RUNNER_ACTIONS: dict[str, tuple[str, ...]] = {
    "ImagelintEc2": (
        "ec2:DescribeImages",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeVpcs",
        "ec2:DescribeSubnets",
        "ec2:DescribeAvailabilityZones",
        "ec2:RunInstances",
        "ec2:DescribeInstances",
        "ec2:GetConsoleOutput",
        "ec2:TerminateInstances",
        "ec2:CreateVolume",
        "ec2:AttachVolume",
        "ec2:DetachVolume",
        "ec2:DeleteVolume",
        "ec2:DescribeVolumes",
        "ec2:CreateTags",
        "ec2:DeregisterImage",
        "ec2:DeleteSnapshot",
        "ec2:EnableImageDeprecation",
    ),
    # launch mode: the subnet's path to SSM and S3, and the run's own security group
    "ImagelintNetwork": (
        "ec2:DescribeRouteTables",
        "ec2:DescribeVpcEndpoints",
        "ec2:DescribeSecurityGroups",
        "ec2:CreateSecurityGroup",
        "ec2:RevokeSecurityGroupEgress",
        "ec2:AuthorizeSecurityGroupEgress",
        "ec2:DeleteSecurityGroup",
    ),
    "ImagelintSsm": (
        "ssm:DescribeInstanceInformation",
        "ssm:SendCommand",
        "ssm:ListCommands",
        "ssm:GetCommandInvocation",
        "ssm:CancelCommand",
    ),
    "ImagelintReports": ("s3:ListBucket", "s3:PutObject", "s3:GetObject"),
    "ImagelintInstanceProfile": ("iam:GetInstanceProfile", "iam:PassRole"),
    "ImagelintRole": ("sts:AssumeRole",),  # only with --role-arn
    # only with --create-profile (and for `ami cleanup` of what those runs left)
    "ImagelintRunProfile": (
        "iam:CreateRole",
        "iam:AttachRolePolicy",
        "iam:PutRolePolicy",
        "iam:CreateInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
        "iam:DetachRolePolicy",
        "iam:DeleteRolePolicy",
        "iam:DeleteRole",
        "iam:ListRoles",
    ),
}

# API operations authorised by another action than their own name
ACTION_OF: dict[str, str] = {"s3:HeadBucket": "s3:ListBucket", "s3:HeadObject": "s3:GetObject"}


def runner_policy() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": sid, "Effect": "Allow", "Action": list(actions), "Resource": "*"}
            for sid, actions in RUNNER_ACTIONS.items()
        ],
    }


def instance_role_policy(bucket: str = "REPORT-BUCKET", prefix: str = "imagelint/") -> dict[str, Any]:
    """Inline policy of the instance profile's role (attach AmazonSSMManagedInstanceCore as well)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ImagelintSsmOutput",
                "Effect": "Allow",
                "Action": ["s3:PutObject"],
                "Resource": f"arn:aws:s3:::{bucket}/{prefix}*",
            }
        ],
    }


INSTANCE_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
SSM_MANAGED_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def help_block(indent: str = "  ") -> str:
    """The three JSON documents, indented so the help keeps them line for line."""

    def block(data: dict[str, Any]) -> str:
        return "\n".join(indent + line for line in json.dumps(data, indent=2).splitlines())

    return "\n\n".join(
        [
            f"{indent}Runner policy (the identity running imagelint):",
            block(runner_policy()),
            f"{indent}Instance profile role: trust policy; attach {SSM_MANAGED_POLICY}, and this inline one:",
            block(INSTANCE_TRUST),
            block(instance_role_policy()),
        ]
    )
