"""Fill the placeholders of the printed IAM policies (``imagelint ami policies --report-bucket ...``).

The policies of :mod:`imagelint.aws.policy` name what only the user knows by placeholders
(``REPORT-BUCKET``, ``ACCOUNT-ID``, ``CANDIDATE-TAG-KEY``/``-VALUE``, ``FLEET-TAG-KEY``/``-VALUE``,
``RUN-ROLE-ARN``, ``INSTANCE-ROLE``), the report prefix by its default (``imagelint/``) and the run
role's permissions boundary by its default (AmazonSSMManagedInstanceCore: :func:`bound`).
:class:`Fill` holds the values given, checked (one line, exit 2, for a malformed one), and
:func:`fill` writes them into a document (values, ARNs and condition keys alike); a value not given
keeps its placeholder, so the output stays byte-stable.
"""

from __future__ import annotations

import re
from typing import Any

from imagelint.aws import policy
from imagelint.aws.partitions import Partition, for_partition, partition_of
from imagelint.errors import UsageError
from imagelint.records import dataclass

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3's bucket naming rules (the characters, length)
_ACCOUNT = re.compile(r"\d{12}")
_ROLE_NAME = re.compile(r"[\w+=,.@-]{1,64}")  # IAM's role name characters
_ROLE_ARN = re.compile(r"arn:([a-z-]+):iam::\d{12}:role/[\w+=,.@/-]+")
_KMS_KEY_ARN = re.compile(r"arn:([a-z-]+):kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}")
_POLICY_ARN = re.compile(r"arn:([a-z-]+):iam::(\d{12}|aws):policy/[\w+=,.@/-]+")


def tag_pair(text: str, option: str) -> tuple[str, list[str]]:
    """``KEY=VALUE[,VALUE...]`` → (KEY, [VALUE...]); a UsageError naming ``option`` otherwise."""
    key, sep, values = text.partition("=")
    listed = [v for v in values.split(",") if v]
    if not sep or not key or not listed or any(c in key for c in "*?"):
        raise UsageError(f"{option} {text!r}: use KEY=VALUE[,VALUE...] (a literal tag key)")
    return key, listed


@dataclass(frozen=True)
class Fill:
    """The values to write in place of the placeholders (None: keep the placeholder)."""

    report_bucket: str | None = None
    report_prefix: str | None = None
    account: str | None = None
    candidate_tag: str | None = None  # KEY=VALUE
    fleet_tag: str | None = None  # KEY=VALUE[,VALUE...]
    role_arn: str | None = None
    instance_role: str | None = None
    permissions_boundary: str | None = None  # the run role's boundary (default AmazonSSMManagedInstanceCore)
    document: str | None = None  # --document NAME[:VERSION] (default AWS-RunShellScript)
    namespace: str | None = None  # --profile-namespace /PATH/PREFIX (default /imagelint/imagelint-)
    sse_kms_key: str | None = None  # fleet --sse-kms-key: the key's ARN (IAM names keys by ARN only)

    def replacements(self, partition: Partition) -> list[tuple[str, str | list[str]]]:
        """(placeholder, value) pairs, the longer placeholders first; checks each value."""
        out: list[tuple[str, str | list[str]]] = []
        if self.report_bucket is not None or self.report_prefix is not None:
            bucket = self.report_bucket or policy.REPORT_BUCKET
            if self.report_bucket is not None and not _BUCKET.fullmatch(self.report_bucket):
                raise UsageError(f"--report-bucket {self.report_bucket!r} is not an S3 bucket name")
            prefix = policy.DEFAULT_REPORT_PREFIX if self.report_prefix is None else self.report_prefix
            if any(c in prefix for c in "*?"):
                raise UsageError(f"--report-prefix {prefix!r}: * and ? would be wildcards in the policy")
            out.append((f"{policy.REPORT_BUCKET}/{policy.DEFAULT_REPORT_PREFIX}", f"{bucket}/{prefix}"))
            out.append((policy.REPORT_BUCKET, bucket))
        if self.account is not None:
            if not _ACCOUNT.fullmatch(self.account):
                raise UsageError(f"--account {self.account!r}: an AWS account id is 12 digits")
            out.append((policy.ACCOUNT, self.account))
        for text, option, (key_token, value_token) in (
            (self.candidate_tag, "--candidate-tag", policy.CANDIDATE_TAG),
            (self.fleet_tag, "--fleet-tag", policy.FLEET_TAG),
        ):
            if text is not None:
                key, values = tag_pair(text, option)
                if option == "--candidate-tag" and len(values) > 1:
                    raise UsageError(f"--candidate-tag {text!r}: one value (the tag candidates carry)")
                out += [(key_token, key), (value_token, values[0] if len(values) == 1 else values)]
        if self.role_arn is not None:
            found = _ROLE_ARN.fullmatch(self.role_arn)
            if not found:
                raise UsageError(
                    f"--role-arn {self.role_arn!r} is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)"
                )
            if found.group(1) != partition.name:
                raise UsageError(
                    f"--role-arn {self.role_arn!r} is in partition {found.group(1)}, "
                    f"the policies in {partition.name}"
                )
            out.append((policy.RUN_ROLE_ARN, self.role_arn))
        if self.namespace is not None:
            given, default = policy.Namespace.parse(self.namespace), policy.Namespace()
            for kind in ("role", "instance-profile"):
                out.append((f":{kind}{default.path}{default.prefix}*", f":{kind}{given.path}{given.prefix}*"))
        if self.document is not None:
            from imagelint.aws.ssm import DOCUMENT, parse_document

            out.append((f"document/{DOCUMENT}", f"document/{parse_document(self.document)[0]}"))
        if self.sse_kms_key is not None:
            found = _KMS_KEY_ARN.fullmatch(self.sse_kms_key)
            if not found or found.group(1) != partition.name:
                raise UsageError(
                    f"--sse-kms-key {self.sse_kms_key!r}: the key's ARN in partition {partition.name} "
                    "(arn:aws:kms:REGION:ACCOUNT:key/ID; an alias cannot scope an IAM statement)"
                )
            out.append((policy.REPORT_KMS_KEY, self.sse_kms_key))
        if self.instance_role is not None:
            if not _ROLE_NAME.fullmatch(self.instance_role):
                raise UsageError(f"--instance-role {self.instance_role!r} is not an IAM role name")
            out.append((policy.INSTANCE_ROLE, self.instance_role))
        return out


def bound(document: Any, boundary: str) -> Any:
    """``document`` with every ``iam:PermissionsBoundary`` condition value set to ``boundary`` (the
    --permissions-boundary the runs give their roles; the same ARN elsewhere, the attachable
    AmazonSSMManagedInstanceCore, stays)."""
    if isinstance(document, dict):
        return {
            key: boundary if key == "iam:PermissionsBoundary" else bound(value, boundary)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [bound(value, boundary) for value in document]
    return document


def fill(document: Any, replacements: list[tuple[str, str | list[str]]]) -> Any:
    """``document`` with each placeholder replaced, in strings and dict keys: a string that is the
    placeholder becomes its value (a list of values too), one that contains it has it replaced."""
    if isinstance(document, dict):
        return {_text(key, replacements): fill(value, replacements) for key, value in document.items()}
    if isinstance(document, list):
        return [fill(value, replacements) for value in document]
    if isinstance(document, str):
        for token, value in replacements:
            if document == token:
                return value
        return _text(document, replacements)
    return document


def _text(text: str, replacements: list[tuple[str, str | list[str]]]) -> str:
    for token, value in replacements:
        if isinstance(value, str):
            text = text.replace(token, value)
    return text


def documents(region: str | None = None, values: Fill | None = None) -> dict[str, Any]:
    """Every IAM document a user pastes, by name, as ``imagelint ami policies`` prints them, for the
    partition of ``region`` (ARNs, endpoint names), with the placeholders ``values`` gives filled in
    (:func:`fill`): the runner's policy, the instance role's trust policy and
    the AWS managed policy it needs (and nothing else: no S3 permission, the instance uploads through
    a presigned URL of its own key), and snapshot mode's smaller runner policy."""
    from imagelint.aws.snapshot import IAM_POLICY

    partition = partition_of(region)
    docs = for_partition(
        {
            "runner": policy.runner_policy(),
            "instance-trust": policy.INSTANCE_TRUST,
            "instance-role-managed-policy": policy.SSM_MANAGED_POLICY,
            "snapshot-mode": IAM_POLICY,
        },
        partition,
    )
    values = values or Fill()
    filled: dict[str, Any] = fill(docs, values.replacements(partition))
    if values.permissions_boundary is not None:
        found = _POLICY_ARN.fullmatch(values.permissions_boundary)
        if not found or found.group(1) != partition.name:
            raise UsageError(
                f"--permissions-boundary {values.permissions_boundary!r} is not an IAM policy ARN of "
                f"partition {partition.name} (arn:{partition.name}:iam::ACCOUNT:policy/NAME)"
            )
        filled = bound(filled, values.permissions_boundary)
    return filled
