"""The IAM policies `imagelint ami` / `fleet` need, as JSON a user can paste (the docs and ``--help``).

Two identities:

- **the runner** (the CI job or workstation running imagelint): :data:`RUNNER_ACTIONS`. It signs the
  presigned URLs the instance uses, so the instance's uploads and downloads are authorised as the
  runner's ``s3:PutObject`` / ``s3:GetObject``. ``HeadBucket`` is authorised as ``s3:ListBucket``,
  which also makes a missing key answer 404 rather than 403. ``iam:PassRole`` lets ``RunInstances``
  give the instance its profile's role (that role only, ``iam:PassedToService`` EC2). Least privilege
  (:data:`RUNNER_STATEMENTS`): the run's instance, volume and security group can only be created
  carrying the run's tag (``aws:RequestTag``), tagged only by their creating call
  (``ec2:CreateAction``), and terminated, detached or deleted only while they carry it
  (``aws:ResourceTag``). ``ssm:SendCommand`` only with the document imagelint sends and only to
  instances carrying the run tag or the fleet's tag (``ssm:resourceTag``); S3 only on the report
  bucket and the objects under the report prefix; ``sts:AssumeRole`` only on the ``--role-arn`` role.
  The gated AMI and its snapshots (``--tag``, ``--on-fail``) are not the run's: those actions are
  allowed only on this account's images and snapshots (``ec2:Owner``) carrying the pipeline's
  candidate tag, and ``CreateTags`` only with the verdict's tag keys (``aws:TagKeys``); the
  placeholders (:data:`REPORT_BUCKET`, :data:`ACCOUNT`...) are filled in by
  :mod:`imagelint.aws.policy_fill`. ``ImagelintNetworkRead`` reads the launch subnet's
  route table and the VPC's endpoints (:mod:`imagelint.aws.network`), the network ACLs, security
  groups and DNS settings on the path (:mod:`imagelint.aws.network_rules`); ``ImagelintGroup*`` make and
  remove the run's security group (:mod:`imagelint.aws.run_group`). The ``ImagelintRunRole*``,
  ``ImagelintRunProfile*`` and ``ImagelintPassRunRole`` statements are needed only with
  ``--create-profile`` (:mod:`imagelint.aws.run_profile`): the runner may create a role only in the
  run namespace (:class:`Namespace`), only with the permissions boundary (``iam:PermissionsBoundary``,
  by default AmazonSSMManagedInstanceCore) and the run's tags, attach only that managed policy
  (``iam:PolicyARN``) and only to a bounded role, and change, pass or delete only roles and profiles
  carrying the run tag (``tests/aws/test_policy_escalation.py`` evaluates each escalation chain).
  ``ImagelintHardened*`` serve hardened accounts: the EBS encryption-by-default pre-flight and the
  ``--resource-tag`` tags on the launch's network interface.
- **the instance profile's role** (launch mode): ``AmazonSSMManagedInstanceCore`` (attach the AWS
  managed policy) and nothing else: no S3 permission at all. The instance uploads its bundle through
  the presigned URL of its own key (signed by the runner, bound to that host:
  :mod:`imagelint.aws.ssm`), and the command asks SSM for no S3 output, so neither the AMI under test
  nor any fleet host can write another host's bundle or another run's objects with the role.

``tests/aws/test_policy.py`` runs every flow against moto, records each API call and each URL the
code signs, and checks that all are in the runner's policy, with the KMS actions AWS performs on the
caller's behalf for an encrypted snapshot (:data:`imagelint.aws.kms.IMPLICIT_KMS`).
"""

from __future__ import annotations

import re
from typing import Any

from imagelint.aws.ec2 import DEADLINE_TAG, RUN_TAG
from imagelint.aws.partitions import Partition, for_partition
from imagelint.aws.ssm import DOCUMENT
from imagelint.errors import UsageError
from imagelint.records import dataclass

_EC2 = "arn:aws:ec2:*:*:{}/*"  # account-owned EC2 resources (instance, volume, subnet...)
_IMAGES = ["arn:aws:ec2:*::image/*", "arn:aws:ec2:*::snapshot/*"]  # images and snapshots: no account
_RUN_RESOURCES = [_EC2.format("instance"), _EC2.format("volume")]
RUN_PROFILE_PATH = "/imagelint/"  # the IAM path of --create-profile's roles and profiles
RUN_PROFILE_PREFIX = "imagelint-"  # ... and their names' prefix: together, the run namespace
RUN_ROLES = f"arn:aws:iam::*:role{RUN_PROFILE_PATH}{RUN_PROFILE_PREFIX}*"
RUN_PROFILES = f"arn:aws:iam::*:instance-profile{RUN_PROFILE_PATH}{RUN_PROFILE_PREFIX}*"
SSM_MANAGED_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
_PATH = re.compile(r"/([\x21-\x7e]{1,510}/)?")  # IAM's path: / or /.../, printable ASCII
_PREFIX = re.compile(r"[\w+=,.@-]{1,27}")  # a role name is at most 64: the prefix and a 36-character run id


@dataclass(frozen=True)
class Namespace:
    """Where --create-profile's roles and profiles live: their IAM path and name prefix
    (``--profile-namespace /PATH/PREFIX``, for an organization's naming rule); the runner's policy
    follows it (:mod:`imagelint.aws.policy_fill`)."""

    path: str = RUN_PROFILE_PATH
    prefix: str = RUN_PROFILE_PREFIX

    @classmethod
    def parse(cls, text: str) -> Namespace:
        """``/PATH/PREFIX`` (the part after the last ``/`` is the name prefix); a UsageError else."""
        path, _, prefix = text.rpartition("/")
        path += "/"
        bad = not text.startswith("/") or any(c in text for c in "*?")
        if bad or not _PATH.fullmatch(path) or not _PREFIX.fullmatch(prefix):
            raise UsageError(
                f"--profile-namespace {text!r}: give /PATH/PREFIX (an IAM path and a role name prefix of "
                "1-27 of letters, digits and + = , . @ _ -; no * or ?)"
            )
        return cls(path, prefix)

    def name(self, run_id: str) -> str:
        return f"{self.prefix}{run_id}"


DEFAULT_REPORT_PREFIX = "imagelint/"  # --report-prefix's default

# Placeholders of the printed policies (`imagelint ami policies` fills them from its options)
INSTANCE_ROLE = "INSTANCE-ROLE"  # the instance profile's role
REPORT_BUCKET = "REPORT-BUCKET"  # --report-bucket
ACCOUNT = "ACCOUNT-ID"  # the account that owns the gated AMIs (ec2:Owner)
CANDIDATE_TAG = ("CANDIDATE-TAG-KEY", "CANDIDATE-TAG-VALUE")  # the tag the pipeline puts on its candidates
FLEET_TAG = ("FLEET-TAG-KEY", "FLEET-TAG-VALUE")  # `fleet --target tag:KEY=VALUE`
RUN_ROLE_ARN = "RUN-ROLE-ARN"  # --role-arn
REPORT_KMS_KEY = "REPORT-KMS-KEY"  # fleet --sse-kms-key: the key's ARN

# The tags --tag writes (imagelint.commands.ami.verdict_tags): CreateTags may write these keys only
VERDICT_TAG_KEYS = (
    "imagelint:verdict",
    "imagelint:report-sha256",
    "imagelint:version",
    "imagelint:checked-at",
)
# The gated AMI and its snapshots: this account's (ec2:Owner) and carrying the pipeline's candidate tag
CANDIDATE = {"ec2:Owner": ACCOUNT, f"aws:ResourceTag/{CANDIDATE_TAG[0]}": CANDIDATE_TAG[1]}


Entry = tuple[tuple[str, ...], str | list[str], dict[str, Any] | None]  # (actions, Resource, Condition)

# --tag: the verdict's tag keys only, on this account's AMI and snapshots carrying the candidate tag
# (the runner's policy and snapshot mode's)
VERDICT_TAGS: Entry = (
    ("ec2:CreateTags",),
    _IMAGES,
    {"StringEquals": CANDIDATE, "ForAllValues:StringEquals": {"aws:TagKeys": list(VERDICT_TAG_KEYS)}},
)


def statement(entry: Entry, sid: str | None = None) -> dict[str, Any]:
    """One IAM statement of ``entry`` (with its ``Sid`` when given)."""
    actions, resource, condition = entry
    out: dict[str, Any] = {} if sid is None else {"Sid": sid}
    out |= {"Effect": "Allow", "Action": list(actions), "Resource": resource}
    if condition:
        out["Condition"] = condition
    return out


# Sid → (actions, Resource, Condition). Why each statement is scoped as it is:
RUNNER_STATEMENTS: dict[str, Entry] = {
    # Describe/List and console reads: EC2 supports no resource-level permission on most of them
    "ImagelintEc2Read": (
        (
            "ec2:DescribeImages",
            "ec2:DescribeSnapshots",
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeInstanceTypeOfferings",
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInstances",
            "ec2:DescribeVolumes",
            "ec2:GetConsoleOutput",
        ),
        "*",
        None,
    ),
    # the run's instance and volume exist only carrying the run tag (TagSpecifications on the create call)
    "ImagelintCreateTagged": (
        ("ec2:RunInstances", "ec2:CreateVolume"),
        _RUN_RESOURCES,
        {"StringLike": {f"aws:RequestTag/{RUN_TAG}": "*"}},
    ),
    # what RunInstances reads or creates untagged: the AMI (any: a public or shared one too), its
    # snapshots, the subnet, security groups and the network interface
    "ImagelintCreateFrom": (
        ("ec2:RunInstances",),
        [*_IMAGES, *(_EC2.format(t) for t in ("subnet", "security-group", "network-interface"))],
        None,
    ),
    # volume mode's volume: only from a snapshot of this account carrying the candidate tag (the
    # gated AMI's), never from a backup or another snapshot the runner could then read
    "ImagelintVolumeFrom": (("ec2:CreateVolume",), "arn:aws:ec2:*::snapshot/*", {"StringEquals": CANDIDATE}),
    # tags only as part of the creating call (the TagSpecifications), never on an existing resource
    "ImagelintTagOnCreate": (
        ("ec2:CreateTags",),
        [*_RUN_RESOURCES, _EC2.format("security-group")],
        {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateVolume", "CreateSecurityGroup"]}},
    ),
    # destructive actions only on resources carrying the run tag (cleanup and `ami cleanup` too);
    # AttachVolume is authorised on the volume and on the instance: both the run's ...
    "ImagelintRunResources": (
        ("ec2:TerminateInstances", "ec2:AttachVolume", "ec2:DetachVolume", "ec2:DeleteVolume"),
        _RUN_RESOURCES,
        {"StringLike": {f"aws:ResourceTag/{RUN_TAG}": "*"}},
    ),
    # ... or, in volume mode, the instance the request comes from (the runner itself: its instance
    # role's credentials carry ec2:SourceInstanceARN, and aws:ARN is the instance named), no other
    "ImagelintRunnerInstance": (
        ("ec2:AttachVolume", "ec2:DetachVolume"),
        _EC2.format("instance"),
        {"StringEquals": {"aws:ARN": "${ec2:SourceInstanceARN}"}},
    ),
    "ImagelintVerdictTags": VERDICT_TAGS,
    # --on-fail only: deregister, deprecate and delete snapshots of this account's AMIs and snapshots
    # that carry the candidate tag (the run did not create them, so its own tag cannot scope them;
    # tag your candidates, e.g. Packer's tags and snapshot_tags, and no backup or released image is
    # reachable)
    "ImagelintOnFail": (
        ("ec2:DeregisterImage", "ec2:EnableImageDeprecation", "ec2:DeleteSnapshot"),
        _IMAGES,
        {"StringEquals": CANDIDATE},
    ),
    # launch mode: the subnet's path to SSM and S3 (route tables, VPC endpoints), the groups, the
    # network ACLs and the VPC's DNS (its attributes and DHCP options)
    "ImagelintNetworkRead": (
        (
            "ec2:DescribeRouteTables",
            "ec2:DescribeVpcEndpoints",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeNetworkAcls",
            "ec2:DescribeVpcAttribute",
            "ec2:DescribeDhcpOptions",
        ),
        "*",
        None,
    ),
    # the run's own security group: created only carrying the run tag, in any VPC ...
    "ImagelintGroupCreate": (
        ("ec2:CreateSecurityGroup",),
        _EC2.format("security-group"),
        {"StringLike": {f"aws:RequestTag/{RUN_TAG}": "*"}},
    ),
    "ImagelintGroupInVpc": (("ec2:CreateSecurityGroup",), _EC2.format("vpc"), None),
    # ... and its rules changed and the group deleted only while it carries the run tag
    "ImagelintGroupRules": (
        ("ec2:RevokeSecurityGroupEgress", "ec2:AuthorizeSecurityGroupEgress", "ec2:DeleteSecurityGroup"),
        _EC2.format("security-group"),
        {"StringLike": {f"aws:ResourceTag/{RUN_TAG}": "*"}},
    ),
    # reads of commands and managed nodes (and the best-effort cancel of a timed-out command): IAM
    # offers them no resource scope
    "ImagelintSsmRead": (
        (
            "ssm:DescribeInstanceInformation",
            "ssm:ListCommands",
            "ssm:GetCommandInvocation",
            "ssm:CancelCommand",
        ),
        "*",
        None,
    ),
    # SendCommand is authorised on the document and on each instance: the one document imagelint sends
    # (AWS-owned: its ARN has no account, which * matches too; no account may name a document AWS-...) ...
    "ImagelintSendDocument": (("ssm:SendCommand",), f"arn:aws:ssm:*:*:document/{DOCUMENT}", None),
    # ... to launch mode's instances (they carry the run tag) ...
    "ImagelintSendRunInstance": (
        ("ssm:SendCommand",),
        _EC2.format("instance"),
        {"StringLike": {f"ssm:resourceTag/{RUN_TAG}": "*"}},
    ),
    # ... and to fleet mode's (the tag of `fleet --target tag:KEY=VALUE`); no other managed node
    "ImagelintSendFleetInstance": (
        ("ssm:SendCommand",),
        _EC2.format("instance"),
        {"StringEquals": {f"ssm:resourceTag/{FLEET_TAG[0]}": FLEET_TAG[1]}},
    ),
    # the report bucket (HeadBucket; a missing key answers 404) and objects under the report prefix
    "ImagelintReportBucket": (("s3:ListBucket",), f"arn:aws:s3:::{REPORT_BUCKET}", None),
    # (fleet deletes each bundle once read: it holds files such as the image's /etc/shadow)
    "ImagelintReports": (
        ("s3:PutObject", "s3:GetObject", "s3:DeleteObject"),
        f"arn:aws:s3:::{REPORT_BUCKET}/{DEFAULT_REPORT_PREFIX}*",
        None,
    ),
    # fleet --bucket-owner (another account's bucket): uploads give its owner full control, no other ACL
    "ImagelintReportsOtherAccount": (
        ("s3:PutObjectAcl",),
        f"arn:aws:s3:::{REPORT_BUCKET}/{DEFAULT_REPORT_PREFIX}*",
        {"StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control"}},
    ),
    # fleet --sse-kms-key: the bundles are encrypted (on upload) and decrypted (on download) with that
    # key, through S3 only
    "ImagelintReportsKms": (
        ("kms:GenerateDataKey", "kms:Decrypt"),
        REPORT_KMS_KEY,
        {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}},
    ),
    "ImagelintInstanceProfile": (("iam:GetInstanceProfile",), "arn:aws:iam::*:instance-profile/*", None),
    # RunInstances gives the instance its profile's role, only to EC2: the instance role the user made ...
    "ImagelintPassRole": (
        ("iam:PassRole",),
        f"arn:aws:iam::*:role/{INSTANCE_ROLE}",
        {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
    ),
    # ... or a --create-profile run's own role (in the run namespace, carrying the run tag)
    "ImagelintPassRunRole": (
        ("iam:PassRole",),
        RUN_ROLES,
        {
            "StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"},
            "StringLike": {f"aws:ResourceTag/{RUN_TAG}": "*"},
        },
    ),
    # only with --role-arn: that role (the run id as the session's SourceIdentity: the role's trust
    # policy must allow sts:SetSourceIdentity too, or the session goes on without it)
    "ImagelintRole": (("sts:AssumeRole", "sts:SetSourceIdentity"), RUN_ROLE_ARN, None),
    # The statements below serve only --create-profile (and `ami cleanup` of what those runs left).
    # A role is created only in the run namespace, with the permissions boundary (by default
    # AmazonSSMManagedInstanceCore itself: the role can never do more than the SSM agent needs,
    # whatever its trust policy says, for which IAM has no condition key) and the run's tags ...
    "ImagelintRunRoleCreate": (
        ("iam:CreateRole",),
        RUN_ROLES,
        {
            "StringEquals": {"iam:PermissionsBoundary": SSM_MANAGED_POLICY},
            "StringLike": {f"aws:RequestTag/{RUN_TAG}": "*", f"aws:RequestTag/{DEADLINE_TAG}": "*"},
        },
    ),
    # ... is given AmazonSSMManagedInstanceCore only, and only while it carries the boundary (AWS's
    # advice when delegating role creation: the boundary on the attach call too); no inline policy
    "ImagelintRunRoleAttach": (
        ("iam:AttachRolePolicy",),
        RUN_ROLES,
        {
            "ArnEquals": {"iam:PolicyARN": SSM_MANAGED_POLICY},
            "StringEquals": {"iam:PermissionsBoundary": SSM_MANAGED_POLICY},
            "StringLike": {f"aws:ResourceTag/{RUN_TAG}": "*"},
        },
    ),
    # the run's tags on its role and profile (IAM checks these for Tags in the create calls)
    "ImagelintRunProfileTags": (
        ("iam:TagRole", "iam:TagInstanceProfile"),
        [RUN_ROLES, RUN_PROFILES],
        {"StringLike": {f"aws:RequestTag/{RUN_TAG}": "*", f"aws:RequestTag/{DEADLINE_TAG}": "*"}},
    ),
    "ImagelintRunProfileCreate": (
        ("iam:CreateInstanceProfile",),
        RUN_PROFILES,
        {"StringLike": {f"aws:RequestTag/{RUN_TAG}": "*", f"aws:RequestTag/{DEADLINE_TAG}": "*"}},
    ),
    # the profile filled, emptied and deleted, and the role stripped and deleted, only while they
    # carry the run tag: a role or profile someone else put in the namespace is not the runner's
    "ImagelintRunProfileChange": (
        ("iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"),
        RUN_PROFILES,
        {"StringLike": {f"aws:ResourceTag/{RUN_TAG}": "*"}},
    ),
    "ImagelintRunRoleRemove": (
        ("iam:DetachRolePolicy", "iam:DeleteRolePolicy", "iam:DeleteRole"),
        RUN_ROLES,
        {"StringLike": {f"aws:ResourceTag/{RUN_TAG}": "*"}},
    ),
    # `ami cleanup` reads a role's tags before it removes it (ownership: run tag and deadline)
    "ImagelintRunRoleRead": (("iam:GetRole",), RUN_ROLES, None),
    "ImagelintRunProfileList": (("iam:ListRoles",), "*", None),  # ListRoles has no resource scope
    # hardened accounts. The EBS encryption-by-default pre-flight (neither call has a resource scope)
    "ImagelintHardenedEbsDefault": (
        ("ec2:GetEbsEncryptionByDefault", "ec2:GetEbsDefaultKmsKeyId"),
        "*",
        None,
    ),
    # --resource-tag: the launch's network interface is tagged too, by RunInstances only
    "ImagelintHardenedInterfaceTags": (
        ("ec2:CreateTags",),
        _EC2.format("network-interface"),
        {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
    ),
}

# API operations authorised by another action than their own name
ACTION_OF: dict[str, str] = {"s3:HeadBucket": "s3:ListBucket", "s3:HeadObject": "s3:GetObject"}
# API operations no IAM policy can allow or deny (AWS STS API reference: GetCallerIdentity)
NO_PERMISSION = frozenset({"sts:GetCallerIdentity"})
# IAM actions that are permissions only, not API operations of their own
PERMISSION_ONLY = {
    "iam:PassRole": "checked when RunInstances gives the instance a profile's role",
    "s3:ListBucket": "authorises ListObjects and HeadBucket",
    "sts:SetSourceIdentity": "checked when AssumeRole carries a SourceIdentity",
}


def runner_policy() -> dict[str, Any]:
    """The runner's policy: :data:`RUNNER_STATEMENTS`, and the KMS statements of
    :mod:`imagelint.aws.kms` for AMIs whose snapshots are encrypted with a KMS key."""
    from imagelint.aws.kms import runner_statements

    statements = [statement(entry, sid) for sid, entry in RUNNER_STATEMENTS.items()]
    return {"Version": "2012-10-17", "Statement": [*statements, *runner_statements()]}


INSTANCE_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def managed_policy_arn(partition: str) -> str:
    """``AmazonSSMManagedInstanceCore`` in ``partition`` (an AWS managed policy has an ARN per partition)."""
    return str(for_partition(SSM_MANAGED_POLICY, Partition(partition, "")))
