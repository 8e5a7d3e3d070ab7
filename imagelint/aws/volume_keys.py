"""KMS keys of the volumes a run creates: ``--volume-kms-key`` and the account's EBS encryption by default.

Both are checked before anything is created, because EBS checks a key only when it makes the volume:
``CreateVolume`` and ``RunInstances`` accept a disabled, pending-deletion or missing key, and minutes
later the volume is in ``error`` or the instance ``terminated`` (``Client.InternalError``).

- ``--volume-kms-key KEY`` (key id, key ARN, alias name or alias ARN): ``kms:DescribeKey`` must find
  it ``Enabled`` and symmetric (``SYMMETRIC_DEFAULT``, ``ENCRYPT_DECRYPT``: EBS encrypts with no
  other kind). The volumes are then created with its key ARN, the key that was checked, not an alias
  that could be pointed elsewhere meanwhile.
- Without it, when EBS encryption by default is on in the region (``ec2:GetEbsEncryptionByDefault``),
  every new volume of an unencrypted snapshot is encrypted with the region's default key
  (``ec2:GetEbsDefaultKmsKeyId``), which is then checked the same way. The AWS managed key
  ``alias/aws/ebs`` needs no check: nobody can disable or delete it. A runner that may not read the
  setting gets a warning (the run goes on; the check is an early answer, not a permission the launch
  needs).

A refusal is one line naming the key and the option or setting (exit 2); the key checks are
:func:`imagelint.aws.kms.describe_key` and :func:`imagelint.aws.kms.require_usable`, those of the
AMI's own snapshot keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imagelint import stderr
from imagelint.aws import kms
from imagelint.aws.errors import AwsError, call
from imagelint.errors import UsageError

AWS_MANAGED_EBS = "alias/aws/ebs"
SYMMETRIC = "SYMMETRIC_DEFAULT"
ENCRYPT_DECRYPT = "ENCRYPT_DECRYPT"
DEFAULT_FIX = (
    "every volume the run creates would be encrypted with it: enable the key, reset the default "
    "(aws ec2 reset-ebs-default-kms-key-id) or give --volume-kms-key"
)


def _usable(clients: Any, key: str, where: str) -> dict[str, Any]:
    """The key's metadata, refused unless it is enabled and symmetric."""
    metadata = kms.describe_key(clients.get("kms"), key, where, kms.LAUNCH)
    kms.require_usable(metadata, where)
    spec = metadata.get("KeySpec") or metadata.get("CustomerMasterKeySpec") or "?"
    usage = metadata.get("KeyUsage") or ENCRYPT_DECRYPT
    if spec != SYMMETRIC or usage != ENCRYPT_DECRYPT:
        raise UsageError(
            f"{where}, a {spec} key for {usage}: EBS encrypts only with a {SYMMETRIC} {ENCRYPT_DECRYPT} key"
        )
    return metadata


def _note(where: str, log: Callable[[str], None]) -> None:
    log(
        f"imagelint: {where} (Enabled): the runner needs {', '.join(kms.LAUNCH)} on it, in its IAM "
        "policy and in the key's policy (which this run cannot read)"
    )


def check_volume_key(clients: Any, key: str, log: Callable[[str], None] = stderr.line) -> str:
    """``--volume-kms-key``: checked; returns the key's ARN, which the volumes are created with."""
    where = f"--volume-kms-key {key}"
    metadata = _usable(clients, key, where)
    _note(where, log)
    return str(metadata.get("Arn") or key)


def is_aws_managed_ebs(key: str) -> bool:
    """``alias/aws/ebs``, by name or alias ARN (``arn:aws:kms:REGION:ACCOUNT:alias/aws/ebs``)."""
    return key == AWS_MANAGED_EBS or key.endswith(f":{AWS_MANAGED_EBS}")


def check_default_key(clients: Any, region: str, log: Callable[[str], None] = stderr.line) -> str | None:
    """The region's EBS encryption-by-default key, when the setting is on; returns the key (None: off,
    or the setting could not be read, which is a warning)."""
    try:
        on = call(clients.ec2.get_ebs_encryption_by_default).get("EbsEncryptionByDefault")
    except AwsError as exc:
        if exc.code != "UnauthorizedOperation":
            raise
        log(
            "warning: the runner may not call ec2:GetEbsEncryptionByDefault, so a disabled or deleted "
            "default EBS key is not found before launch (add ec2:GetEbsEncryptionByDefault and "
            "ec2:GetEbsDefaultKmsKeyId to its policy)"
        )
        return None
    if not on:
        return None
    key = str(call(clients.ec2.get_ebs_default_kms_key_id).get("KmsKeyId") or AWS_MANAGED_EBS)
    if is_aws_managed_ebs(key):
        return key
    where = f"EBS encryption by default is on in {region} with KMS key {key}"
    try:
        _usable(clients, key, where)
    except UsageError as exc:
        raise UsageError(f"{exc}; {DEFAULT_FIX}") from None
    _note(where, log)
    return key
