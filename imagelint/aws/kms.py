"""KMS keys of an AMI's encrypted snapshots: what each AMI mode needs of them, and the pre-flight check.

An AMI whose snapshots are encrypted with a customer managed key launches (RunInstances), turns
into a volume (CreateVolume) and is read (EBS direct APIs) only if the caller may use the key; EC2
and EBS call KMS *on the caller's behalf*, so the caller's identity needs the KMS actions although
imagelint never calls them itself. Without them AWS does not refuse the call: the instance goes
``pending`` → ``terminated`` (``Client.InternalError``) or the volume ends in ``error``, minutes later.

What AWS documents (Amazon EBS User Guide, "Requirements for Amazon EBS encryption", Permissions for
users): ``kms:CreateGrant`` (only with ``kms:GrantIsForAWSResource``: EC2 creates the grant that lets
the instance's host use the key), ``kms:Decrypt`` (the volume's data key), ``kms:DescribeKey``,
``kms:GenerateDataKeyWithoutPlaintext`` (a new volume's data key) and ``kms:ReEncrypt*`` (a volume
re-encrypted from the snapshot's key). Those, other than DescribeKey and CreateGrant, are only ever
called by EC2, so the printed policy allows them only ``kms:ViaService`` ``ec2.*.amazonaws.com`` (the
condition the ``aws/ebs`` key's own policy uses). Reading a snapshot through the EBS direct APIs
needs ``kms:Decrypt`` on its key (and ``kms:DescribeKey`` for this check).

:data:`IMPLICIT_KMS` is that table: the calls imagelint makes → the KMS actions AWS performs with the
caller's permissions when the snapshot is encrypted (``tests/aws/test_policy.py`` checks the printed
policies cover them). :func:`check_image` is the pre-flight: for each encrypted snapshot, its key
(``DescribeSnapshots`` → ``KmsKeyId``) must exist, be ``Enabled`` (not pending deletion) and not be
another account's AWS managed key (``aws/ebs`` cannot be shared); a failure is one line naming the
key and the permission (exit 2). What the runner cannot see, the key policy, is said as a note naming
the key and the actions it must allow. :func:`check_owned` refuses, for snapshot mode, a snapshot
this account does not own: the EBS direct APIs read only those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imagelint import stderr
from imagelint.aws.errors import AwsError, call
from imagelint.errors import UsageError

KEY_ARNS = "arn:aws:kms:*:*:key/*"  # narrow to the keys of your AMIs' snapshots (the notes name them)

# What the caller's identity needs on the key, per mode (AWS's list for EBS encryption; the direct APIs)
LAUNCH = (
    "kms:CreateGrant",
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncrypt*",
)
READ = ("kms:Decrypt", "kms:DescribeKey")

_BY_EC2 = ("kms:CreateGrant", "kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncrypt*")
# The calls of the AMI flows → the KMS actions AWS performs with the caller's permissions when the
# snapshot behind them is encrypted with a KMS key (never in a record of the caller's own calls).
IMPLICIT_KMS: dict[str, tuple[str, ...]] = {
    "ec2:RunInstances": _BY_EC2,  # the AMI's volumes are created and attached to the new instance
    "ec2:CreateVolume": _BY_EC2,  # volume mode: the root volume from the snapshot
    "ebs:ListSnapshotBlocks": ("kms:Decrypt",),  # snapshot mode: the direct APIs decrypt the blocks
    "ebs:GetSnapshotBlock": ("kms:Decrypt",),
    "ebs:ListChangedBlocks": ("kms:Decrypt",),
}

USABLE = "Enabled"


def runner_statements() -> list[dict[str, Any]]:
    """The KMS statements of the runner policy (launch and volume mode)."""
    return [
        {
            "Sid": "ImagelintKmsDescribe",  # the pre-flight's own call
            "Effect": "Allow",
            "Action": ["kms:DescribeKey"],
            "Resource": KEY_ARNS,
        },
        {
            "Sid": "ImagelintKmsViaEc2",  # called by EC2 for RunInstances / CreateVolume, never directly
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncrypt*"],
            "Resource": KEY_ARNS,
            "Condition": {"StringLike": {"kms:ViaService": "ec2.*.amazonaws.com"}},
        },
        {
            "Sid": "ImagelintKmsGrant",  # the grant EC2 creates for the instance's volumes
            "Effect": "Allow",
            "Action": ["kms:CreateGrant"],
            "Resource": KEY_ARNS,
            "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
        },
    ]


def caller_account(clients: Any) -> str:
    """The account of the credentials (``sts:GetCallerIdentity`` needs no permission)."""
    return str(call(clients.get("sts").get_caller_identity)["Account"])


def describe_snapshot(ec2: Any, snapshot_id: str) -> dict[str, Any] | None:
    """The snapshot as this account sees it; None when it cannot (another account's, not shared)."""
    try:
        found = call(ec2.describe_snapshots, SnapshotIds=[snapshot_id]).get("Snapshots", [])
    except AwsError as exc:
        if exc.code == "InvalidSnapshot.NotFound":
            return None
        if exc.code == "UnauthorizedOperation":
            raise UsageError(
                f"{snapshot_id}: the runner may not call ec2:DescribeSnapshots, which the pre-flight "
                "needs to find the snapshot's owner and KMS key: add it to the runner's policy"
            ) from None
        raise
    return dict(found[0]) if found else None


def check_image(
    clients: Any,
    image_id: str,
    snapshot_ids: list[str],
    needed: tuple[str, ...],
    log: Callable[[str], None] = stderr.line,
    *,
    mappings: tuple[dict[str, Any], ...] = (),
) -> list[str]:
    """Check the KMS key of each encrypted snapshot (see the module); returns the keys checked.
    A snapshot this account cannot see (a shared AMI's) is judged by what the AMI's block device
    ``mappings`` say of it (``Encrypted``, ``KmsKeyId``); when they say nothing, a line says that
    its key could not be checked."""
    account: str | None = None
    keys: list[str] = []
    for snapshot_id in snapshot_ids:
        snapshot = describe_snapshot(clients.ec2, snapshot_id) or _as_mapped(mappings, snapshot_id)
        if snapshot is None:
            log(
                f"imagelint: {image_id}: snapshot {snapshot_id} is not visible to this account and the "
                "AMI does not say how it is encrypted: its KMS key could not be checked (a key not "
                "shared with this account makes the launch fail)"
            )
            continue
        if not snapshot.get("Encrypted") or not snapshot.get("KmsKeyId"):
            continue
        key = str(snapshot["KmsKeyId"])
        where = f"{image_id}: snapshot {snapshot_id} is encrypted with KMS key {key}"
        metadata = describe_key(clients.get("kms"), key, where, needed)
        state = require_usable(metadata, where)
        owner = str(metadata.get("AWSAccountId") or "")
        if metadata.get("KeyManager") == "AWS":
            account = account or caller_account(clients)
            if owner and owner != account:
                raise UsageError(
                    f"{where}, the AWS managed key (aws/ebs) of account {owner}: an AWS managed key "
                    "cannot be used from another account; its owner must copy the AMI re-encrypted "
                    "with a customer managed key shared with this one (aws ec2 copy-image --encrypted "
                    "--kms-key-id KEY)"
                )
        if key not in keys:
            keys.append(key)
            log(
                f"imagelint: {where} ({state}): the runner needs {', '.join(needed)} on it, in its "
                "IAM policy and in the key's policy (which this run cannot read)"
            )
    return keys


def _as_mapped(mappings: tuple[dict[str, Any], ...], snapshot_id: str) -> dict[str, Any] | None:
    """What the AMI's block device mapping of ``snapshot_id`` says of its encryption (DescribeImages
    answers it for a shared AMI whose snapshots the caller cannot describe); None: nothing."""
    for mapping in mappings:
        ebs = mapping.get("Ebs") or {}
        if ebs.get("SnapshotId") == snapshot_id and "Encrypted" in ebs:
            return {"Encrypted": ebs["Encrypted"], "KmsKeyId": ebs.get("KmsKeyId")}
    return None


def require_usable(metadata: dict[str, Any], where: str) -> str:
    """The key's state, which must be ``Enabled`` (disabled, pending deletion or import: EC2 cannot
    use it); ``where`` starts the one line of the refusal."""
    state = str(metadata.get("KeyState", "?"))
    if state != USABLE:
        raise UsageError(
            f"{where}, which is {state}: EC2 cannot use it"
            + (" (cancel the key's deletion and enable it)" if state == "PendingDeletion" else "")
        )
    return state


def describe_key(kms: Any, key: str, where: str, needed: tuple[str, ...]) -> dict[str, Any]:
    """``kms:DescribeKey``; a missing key, a denied call or an unusable key is one line (exit 2)
    starting with ``where``."""
    try:
        return dict(call(kms.describe_key, KeyId=key)["KeyMetadata"])
    except AwsError as exc:
        if exc.code == "NotFoundException":
            raise UsageError(f"{where}, which does not exist (or is in another region)") from None
        if exc.code in ("AccessDeniedException", "AccessDenied"):
            raise UsageError(
                f"{where}: the runner may not call kms:DescribeKey on it (missing permission); it needs "
                f"{', '.join(needed)} on the key, in its IAM policy and in the key's policy"
            ) from None
        if exc.code == "KMSInvalidStateException":
            raise UsageError(f"{where}, which is not usable: {exc.detail}") from None
        raise


def check_owned(clients: Any, image_id: str, snapshot_id: str, region: str) -> None:
    """Snapshot mode: the EBS direct APIs read only snapshots of this account (they answer
    AccessDenied / ValidationException for a public or shared one), so say so before reading."""
    snapshot = describe_snapshot(clients.ec2, snapshot_id)
    owner = None if snapshot is None else str(snapshot.get("OwnerId") or "")
    account = caller_account(clients)
    if owner == account:
        return
    whose = "not visible to this account" if snapshot is None else f"owned by account {owner}"
    raise UsageError(
        f"{image_id}: its root snapshot {snapshot_id} is {whose}, and the EBS direct APIs read only "
        f"snapshots this account ({account}) owns: copy the AMI into it first (aws ec2 copy-image "
        f"--source-image-id {image_id} --source-region {region} --region {region} --name NAME) and "
        "check the copy, or use --mode launch"
    )
