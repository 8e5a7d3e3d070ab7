"""The keys of the volumes a run creates (imagelint.aws.volume_keys): ``--volume-kms-key`` and the
region's EBS encryption-by-default key are checked before anything exists; an unusable one is one
line naming the key and the option or setting (exit 2).

moto answers KMS and ``GetEbsEncryptionByDefault``; the front answers ``GetEbsDefaultKmsKeyId``
(moto does not implement it: ``env.ebs_default_key``) and refuses calls (``env.refuse``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from imagelint.aws import volume_keys
from imagelint.errors import UsageError
from tests.aws.moto_env import REGION, MotoEnv
from tests.aws.test_kms import _clients, _one_error_line
from tests.support import run_cli


def _key(env: MotoEnv, state: str = "Enabled", **create: str) -> str:
    """A new customer managed key in ``state`` (Enabled, Disabled, PendingDeletion): its ARN."""
    kms = env.client("kms")
    arn = str(kms.create_key(Description="imagelint test", **create)["KeyMetadata"]["Arn"])
    key_id = arn.rsplit("/", 1)[1]  # moto's DisableKey and ScheduleKeyDeletion take the id only
    if state == "Disabled":
        kms.disable_key(KeyId=key_id)
    elif state == "PendingDeletion":
        kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=7)
    return arn


def _lines() -> tuple[list[str], Callable[[str], None]]:
    seen: list[str] = []
    return seen, seen.append


@pytest.mark.parametrize("given", ["arn", "id", "alias", "alias-arn"])
def test_the_volume_key_is_resolved_to_the_arn_that_was_checked(aws_env: MotoEnv, given: str) -> None:
    arn = _key(aws_env)
    aws_env.client("kms").create_alias(AliasName="alias/imagelint-volumes", TargetKeyId=arn)
    account_region = arn.split(":key/")[0]
    name = {
        "arn": arn,
        "id": arn.rsplit("/", 1)[1],
        "alias": "alias/imagelint-volumes",
        "alias-arn": f"{account_region}:alias/imagelint-volumes",
    }[given]
    seen, log = _lines()
    assert volume_keys.check_volume_key(_clients(aws_env), name, log) == arn
    assert len(seen) == 1 and name in seen[0] and "kms:CreateGrant" in seen[0]


@pytest.mark.parametrize("state", ["Disabled", "PendingDeletion"])
def test_an_unusable_volume_key_is_refused_naming_it(aws_env: MotoEnv, state: str) -> None:
    arn = _key(aws_env, state)
    with pytest.raises(UsageError, match=f"--volume-kms-key {arn}, which is {state}"):
        volume_keys.check_volume_key(_clients(aws_env), arn)


def test_a_missing_volume_key_is_refused_naming_it(aws_env: MotoEnv) -> None:
    with pytest.raises(UsageError, match="--volume-kms-key alias/nothing-here, which does not exist"):
        volume_keys.check_volume_key(_clients(aws_env), "alias/nothing-here")


def test_an_asymmetric_volume_key_is_refused(aws_env: MotoEnv) -> None:
    arn = _key(aws_env, KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")
    with pytest.raises(UsageError, match="RSA_2048 key for SIGN_VERIFY: EBS encrypts only with a SYMMETRIC"):
        volume_keys.check_volume_key(_clients(aws_env), arn)


def test_encryption_by_default_off_checks_no_key(aws_env: MotoEnv) -> None:
    aws_env.ebs_default_key = "alias/does-not-exist"  # never asked for
    assert volume_keys.check_default_key(_clients(aws_env), REGION) is None
    assert ("testing", "GetEbsDefaultKmsKeyId") not in aws_env.seen_calls


def test_the_aws_managed_default_key_needs_no_check(aws_env: MotoEnv) -> None:
    aws_env.client("ec2", direct=True).enable_ebs_encryption_by_default()
    assert volume_keys.check_default_key(_clients(aws_env), REGION) == aws_env.ebs_default_key
    assert volume_keys.is_aws_managed_ebs(aws_env.ebs_default_key)
    assert not any(action == "DescribeKey" for _, action in aws_env.seen_calls)


def test_an_enabled_default_key_passes_with_a_note(aws_env: MotoEnv) -> None:
    aws_env.client("ec2", direct=True).enable_ebs_encryption_by_default()
    aws_env.ebs_default_key = _key(aws_env)
    seen, log = _lines()
    assert volume_keys.check_default_key(_clients(aws_env), REGION, log) == aws_env.ebs_default_key
    assert len(seen) == 1 and aws_env.ebs_default_key in seen[0]


@pytest.mark.parametrize("state", ["Disabled", "PendingDeletion", "missing"])
def test_an_unusable_default_key_refuses_the_launch_before_anything_exists(
    moto_env: MotoEnv, state: str
) -> None:
    moto_env.client("ec2", direct=True).enable_ebs_encryption_by_default()
    key = (
        "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000"
        if state == "missing"
        else _key(moto_env, state)
    )
    moto_env.ebs_default_key = key
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--soak", "0", "--poll", "0.2s", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert f"EBS encryption by default is on in {REGION} with KMS key {key}" in line
    assert ("does not exist" if state == "missing" else f"which is {state}") in line
    assert "reset-ebs-default-kms-key-id" in line
    assert not [a for _, a in moto_env.seen_calls if a in ("RunInstances", "CreateSecurityGroup")]
    assert moto_env.launched() == []


def test_a_given_volume_key_makes_the_default_key_irrelevant(aws_env: MotoEnv) -> None:
    """With --volume-kms-key every volume names its key: a broken default is not looked at."""
    from imagelint.aws.ec2 import ImageInfo, LaunchSettings
    from imagelint.aws.progress import Progress
    from imagelint.commands.ami import AmiOptions, volume_key

    aws_env.client("ec2", direct=True).enable_ebs_encryption_by_default()
    aws_env.ebs_default_key = _key(aws_env, "Disabled")
    arn = _key(aws_env)
    image = ImageInfo(aws_env.image_id, REGION, "n", "/dev/xvda", None, [], "x86_64")
    options = AmiOptions(launch=LaunchSettings(kms_key=arn))
    with Progress(interactive=False) as progress:
        assert volume_key(_clients(aws_env), image, options, progress) == arn
        with pytest.raises(UsageError, match="EBS encryption by default is on"):
            volume_key(_clients(aws_env), image, AmiOptions(), progress)


def test_a_runner_that_may_not_read_the_setting_is_warned_and_goes_on(aws_env: MotoEnv) -> None:
    aws_env.refuse["GetEbsEncryptionByDefault"] = ("UnauthorizedOperation", "You are not authorized")
    seen, log = _lines()
    assert volume_keys.check_default_key(_clients(aws_env), REGION, log) is None
    assert len(seen) == 1 and seen[0].startswith("warning:") and "ec2:GetEbsEncryptionByDefault" in seen[0]
