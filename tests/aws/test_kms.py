"""The KMS pre-flight (imagelint.aws.kms): an AMI whose snapshot is encrypted with a key the run cannot
use fails in seconds with one line naming the key and what is missing (exit 2), before any launch;
snapshot mode refuses a snapshot of another account before reading a block.

moto (through the front) answers EC2 and KMS; what moto cannot produce (a denied DescribeKey, another
account's AWS managed key) comes from botocore's Stubber, which checks each request and reply against
the KMS service model.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from imagelint.aws import kms
from imagelint.aws.clients import Clients
from imagelint.errors import UsageError
from tests.aws.ebs_upload import encrypted_image
from tests.aws.moto_env import REGION, MotoEnv
from tests.support import run_cli


def _clients(env: MotoEnv) -> Clients:
    import boto3

    return Clients(REGION, boto3.session.Session(**_credentials(env)))


def _credentials(env: MotoEnv) -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": REGION}


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("imagelint: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("state", ["Disabled", "PendingDeletion"])
def test_launch_refuses_an_unusable_key_before_launching(moto_env: MotoEnv, state: str) -> None:
    image, snapshot, key = encrypted_image(moto_env)
    kms_client = moto_env.client("kms")
    if state == "Disabled":
        kms_client.disable_key(KeyId=key.rsplit("/", 1)[1])
    else:
        kms_client.schedule_key_deletion(KeyId=key.rsplit("/", 1)[1], PendingWindowInDays=7)
    proc = run_cli(
        "ami", image, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--soak", "0", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert key in line and snapshot in line and state in line
    assert moto_env.launched() == []


def test_volume_mode_refuses_a_missing_key(aws_env: MotoEnv) -> None:
    image, snapshot, key = encrypted_image(aws_env)
    # the key is gone from the account: the snapshot still names it
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.kms.models import kms_backends

    del kms_backends[DEFAULT_ACCOUNT_ID][REGION].keys[key.rsplit("/", 1)[1]]
    with pytest.raises(UsageError, match=f"{key}, which does not exist"):
        kms.check_image(_clients(aws_env), image, [snapshot], kms.LAUNCH)


def test_an_enabled_key_passes_with_a_note_naming_the_key_and_actions(aws_env: MotoEnv) -> None:
    image, snapshot, key = encrypted_image(aws_env)
    notes: list[str] = []
    assert kms.check_image(_clients(aws_env), image, [snapshot], kms.LAUNCH, notes.append) == [key]
    assert len(notes) == 1 and key in notes[0]
    assert all(action in notes[0] for action in kms.LAUNCH)


def test_an_unencrypted_snapshot_is_not_looked_at_further(aws_env: MotoEnv) -> None:
    ec2 = aws_env.client("ec2")
    snapshot = ec2.describe_images(ImageIds=[aws_env.image_id])["Images"][0]["BlockDeviceMappings"][0]
    notes: list[str] = []
    clients = _clients(aws_env)
    assert (
        kms.check_image(clients, aws_env.image_id, [snapshot["Ebs"]["SnapshotId"]], kms.LAUNCH, notes.append)
        == []
    )
    assert notes == [] and "kms" not in clients._cache


def _stubbed_kms(clients: Clients, reply: dict[str, Any] | None, error: str | None, key: str) -> Stubber:
    client = clients.session.client("kms", region_name=REGION)
    stubber = Stubber(client)
    if error:
        stubber.add_client_error("describe_key", service_error_code=error, expected_params={"KeyId": key})
    else:
        stubber.add_response("describe_key", {"KeyMetadata": reply}, {"KeyId": key})
    clients._cache["kms"] = client
    stubber.activate()
    return stubber


def test_a_denied_describe_key_names_the_key_and_the_permission(aws_env: MotoEnv) -> None:
    image, snapshot, key = encrypted_image(aws_env)
    clients = _clients(aws_env)
    stubber = _stubbed_kms(clients, None, "AccessDeniedException", key)
    with pytest.raises(UsageError) as caught:
        kms.check_image(clients, image, [snapshot], kms.LAUNCH)
    stubber.assert_no_pending_responses()
    message = str(caught.value)
    assert key in message and "kms:DescribeKey" in message and "kms:CreateGrant" in message
    assert "\n" not in message


def test_another_accounts_aws_managed_key_cannot_be_used(aws_env: MotoEnv) -> None:
    image, snapshot, _ = encrypted_image(aws_env)
    other = "arn:aws:kms:us-east-1:111122223333:key/0c5d8f2e-1111-4222-8333-444455556666"
    # the snapshot names a key of another account (moto keeps whatever CopySnapshot was given)
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    ec2_backends[DEFAULT_ACCOUNT_ID][REGION].snapshots[snapshot].kms_key_id = other
    clients = _clients(aws_env)
    metadata = {
        "AWSAccountId": "111122223333",
        "KeyId": other.rsplit("/", 1)[1],
        "Arn": other,
        "KeyManager": "AWS",
        "KeyState": "Enabled",
        "Description": "Default key that protects my EBS volumes when no other key is defined",
    }
    stubber = _stubbed_kms(clients, metadata, None, other)
    with pytest.raises(UsageError, match=r"AWS managed key \(aws/ebs\) of account 111122223333") as caught:
        kms.check_image(clients, image, [snapshot], kms.LAUNCH)
    stubber.assert_no_pending_responses()
    assert other in str(caught.value) and "copy-image" in str(caught.value)


def test_snapshot_mode_refuses_another_accounts_snapshot(moto_env: MotoEnv) -> None:
    # moto's built-in AMI: its snapshot belongs to Amazon's account, not to the caller's
    proc = run_cli("ami", moto_env.image_id, "--mode", "snapshot", env=moto_env.env)
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "owned by account 137112412989" in line and "copy-image" in line
    assert moto_env.ebs.lists == 0 and moto_env.ebs.gets == []  # refused before reading


def test_snapshot_mode_refuses_a_snapshot_it_cannot_see(moto_env: MotoEnv) -> None:
    # AWS answers DescribeSnapshots for a snapshot that is not shared with InvalidSnapshot.NotFound
    moto_env.refuse["DescribeSnapshots"] = ("InvalidSnapshot.NotFound", "The snapshot does not exist.")
    proc = run_cli("ami", moto_env.image_id, "--mode", "snapshot", env=moto_env.env)
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "not visible to this account" in line and "copy-image" in line
    assert moto_env.ebs.lists == 0


def test_a_denied_describe_snapshots_is_one_line_naming_the_permission(aws_env: MotoEnv) -> None:
    aws_env.refuse["DescribeSnapshots"] = ("UnauthorizedOperation", "You are not authorized")
    with pytest.raises(UsageError, match="ec2:DescribeSnapshots"):
        kms.check_image(_clients(aws_env), "ami-12345678", ["snap-12345678"], kms.LAUNCH)


def test_a_shared_amis_invisible_snapshot_is_judged_by_the_amis_mapping(aws_env: MotoEnv) -> None:
    """A shared AMI: DescribeSnapshots answers InvalidSnapshot.NotFound for its snapshot, as AWS does
    for a snapshot not shared with the caller. What DescribeImages says of the mapping (Encrypted,
    KmsKeyId) is checked instead: a disabled key is refused; a mapping that says nothing is one note."""
    image, snapshot, key = encrypted_image(aws_env)
    aws_env.client("kms").disable_key(KeyId=key.rsplit("/", 1)[1])
    aws_env.refuse["DescribeSnapshots"] = ("InvalidSnapshot.NotFound", "The snapshot does not exist.")
    mapped = {"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": snapshot, "Encrypted": True, "KmsKeyId": key}}
    with pytest.raises(
        UsageError, match=f"snapshot {snapshot} is encrypted with KMS key {key}, which is Disabled"
    ):
        kms.check_image(_clients(aws_env), image, [snapshot], kms.LAUNCH, mappings=(mapped,))
    notes: list[str] = []
    silent = {"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": snapshot}}
    assert (
        kms.check_image(_clients(aws_env), image, [snapshot], kms.LAUNCH, notes.append, mappings=(silent,))
        == []
    )
    assert len(notes) == 1 and f"snapshot {snapshot} is not visible to this account" in notes[0]
