"""Contract tests: each request the EC2/IAM/S3 code makes, checked against botocore's service models
(``botocore.stub.Stubber`` validates the parameters and the canned answers against the model), with
the answers real AWS gives and moto does not (NotFound right after a create, a volume in ``error``,
StateReason, no default VPC, paged answers, base64 console output, 403 for a missing key)."""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

from imagelint.aws import ec2 as ec2_ops
from imagelint.aws import preflight
from imagelint.aws.errors import AwsError, call, missing_object
from imagelint.aws.volume import device_slot
from imagelint.errors import TargetError, UsageError
from tests.support import is_root, need

AMI = "ami-0123456789abcdef0"
IID = "i-0123456789abcdef0"


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> boto3.session.Session:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return boto3.session.Session(aws_access_key_id="AK", aws_secret_access_key="SK", region_name="eu-west-1")


@pytest.fixture
def ec2(session):
    client = session.client("ec2")
    with Stubber(client) as stub:
        client.stub = stub
        yield client
    stub.assert_no_pending_responses()


def _image(arch: str = "x86_64", delete: bool = False) -> ec2_ops.ImageInfo:
    return ec2_ops.ImageInfo(
        image_id=AMI,
        region="eu-west-1",
        name="n",
        root_device="/dev/xvda",
        root_snapshot="snap-1",
        snapshots=["snap-1", "snap-2"],
        architecture=arch,
        mappings=(
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {
                    "SnapshotId": "snap-1",
                    "VolumeSize": 8,
                    "VolumeType": "gp3",
                    "DeleteOnTermination": delete,
                },
            },
            {
                "DeviceName": "/dev/xvdb",
                "Ebs": {"SnapshotId": "snap-2", "VolumeSize": 20, "DeleteOnTermination": False},
            },
            {"DeviceName": "/dev/xvdc", "VirtualName": "ephemeral0"},
        ),
    )


def test_run_instances_request(ec2):
    settings = ec2_ops.LaunchSettings(instance_type="t3.medium", subnet="subnet-1", instance_profile="p")
    expected = {
        "ImageId": AMI,
        "InstanceType": "t3.medium",
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        "TagSpecifications": ANY,
        "CreditSpecification": {"CpuCredits": "standard"},  # not unlimited: a loop would be billed
        "SubnetId": "subnet-1",
        "IamInstanceProfile": {"Name": "p"},
        "BlockDeviceMappings": [
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {
                    "SnapshotId": "snap-1",
                    "VolumeSize": 8,
                    "VolumeType": "gp3",
                    "DeleteOnTermination": True,
                },
            },
            {
                "DeviceName": "/dev/xvdb",
                "Ebs": {"SnapshotId": "snap-2", "VolumeSize": 20, "DeleteOnTermination": True},
            },
        ],
        "UserData": ANY,
    }
    ec2.stub.add_response("run_instances", {"Instances": [{"InstanceId": IID}]}, expected)
    assert ec2_ops.launch_instance(ec2, _image(), settings, "run-1", deadline=1900) == IID


def test_a_type_without_cpu_credits_gets_no_credit_specification(ec2):
    settings = ec2_ops.LaunchSettings(instance_type="m6i.large", subnet="subnet-1", instance_profile="p")
    expected = {
        "ImageId": AMI,
        "InstanceType": "m6i.large",
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        "TagSpecifications": ANY,
        "SubnetId": "subnet-1",
        "IamInstanceProfile": {"Name": "p"},
        "BlockDeviceMappings": ANY,
    }  # no CreditSpecification: the stub refuses a request with a key it was not told of
    ec2.stub.add_response("run_instances", {"Instances": [{"InstanceId": IID}]}, expected)
    assert ec2_ops.launch_instance(ec2, _image(), settings, "run-1") == IID


def test_deadman_user_data_powers_off_after_the_deadline(tmp_path):
    import subprocess

    script = ec2_ops.deadman_user_data(1900)
    assert script.startswith("#!/bin/sh\n") and "shutdown -P +32 " in script
    # it is valid sh and returns at once (the fallback sleeps in the background)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "shutdown").write_text('#!/bin/sh\necho "$@" > "$OUT"\n')
    (fake / "shutdown").chmod(0o755)
    out = tmp_path / "args"
    subprocess.run(
        ["sh", "-c", script], env={"PATH": f"{fake}:/usr/bin:/bin", "OUT": str(out)}, check=True, timeout=10
    )
    assert out.read_text().split()[:2] == ["-P", "+32"]


def test_instance_type_follows_the_architecture(ec2):
    assert ec2_ops.instance_type_for(ec2, _image("arm64"), ec2_ops.LaunchSettings()) == "t4g.medium"
    assert ec2_ops.instance_type_for(ec2, _image("x86_64"), ec2_ops.LaunchSettings()) == "t3.medium"
    answer = {
        "InstanceTypes": [
            {"InstanceType": "t3.large", "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}
        ]
    }
    ec2.stub.add_response("describe_instance_types", answer, {"InstanceTypes": ["t3.large"]})
    with pytest.raises(
        UsageError, match=r"runs x86_64, but ami-.* is arm64: pick a arm64 type \(e.g. t4g.medium\)"
    ):
        ec2_ops.instance_type_for(ec2, _image("arm64"), ec2_ops.LaunchSettings(instance_type="t3.large"))


def _instance(state: str, **extra) -> dict:
    return {
        "Reservations": [{"Instances": [{"InstanceId": IID, "State": {"Name": state, "Code": 0}, **extra}]}]
    }


def test_not_found_right_after_run_instances_is_retried(ec2):
    for _ in range(2):
        ec2.stub.add_client_error(
            "describe_instances",
            "InvalidInstanceID.NotFound",
            "no such",
            expected_params={"InstanceIds": [IID]},
        )
    ec2.stub.add_response("describe_instances", _instance("running"), {"InstanceIds": [IID]})
    ec2_ops.wait_running(ec2, IID, poll=0.01, timeout=5)
    ec2.stub.assert_no_pending_responses()  # both NotFound answers retried, until "running" was seen


def test_not_found_retries_are_bounded(ec2):
    for _ in range(3):
        ec2.stub.add_client_error("describe_instances", "InvalidInstanceID.NotFound", "no such")
    with pytest.raises(AwsError, match="NotFound"):
        ec2_ops.retry_not_found(ec2.describe_instances, tries=3, delay=0.001, InstanceIds=[IID])


def test_state_reason_is_kept(ec2):
    reason = {"Code": "Client.InternalError", "Message": "Client.InternalError: Client error on launch"}
    ec2.stub.add_response("describe_instances", _instance("terminated", StateReason=reason))
    with pytest.raises(AwsError, match=r"is terminated \(Client.InternalError: Client error on launch\)"):
        ec2_ops.wait_running(ec2, IID, poll=0.01, timeout=5)


def test_early_terminate_not_found_is_retried_then_waited(ec2):
    ec2.stub.add_client_error(
        "terminate_instances", "InvalidInstanceID.NotFound", "no such", expected_params={"InstanceIds": [IID]}
    )
    ec2.stub.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": [IID]})
    ec2.stub.add_response("describe_instances", _instance("shutting-down"), {"InstanceIds": [IID]})
    ec2.stub.add_response("describe_instances", _instance("terminated"), {"InstanceIds": [IID]})
    ec2_ops.terminate_instances(ec2, [IID], poll=0.01)
    ec2.stub.assert_no_pending_responses()  # terminate retried, then described until "terminated"


def test_volume_in_error_state_fails_at_once(ec2):
    ec2.stub.add_client_error("describe_volumes", "InvalidVolume.NotFound", "fresh id")
    ec2.stub.add_response("describe_volumes", {"Volumes": [{"VolumeId": "vol-1", "State": "creating"}]})
    ec2.stub.add_response("describe_volumes", {"Volumes": [{"VolumeId": "vol-1", "State": "error"}]})
    with pytest.raises(AwsError, match="vol-1 is error, not available"):
        ec2_ops.wait_volume(ec2, "vol-1", "available", poll=0.01)


def test_console_output_is_decoded_and_escaped(ec2):
    raw = "Booting\n\x1b[2J\x1b]0;pwned\x07::set-output name=x::1\nlogin: "
    answer = {"InstanceId": IID, "Output": base64.b64encode(raw.encode()).decode()}
    ec2.stub.add_response("get_console_output", answer, {"InstanceId": IID, "Latest": True})
    text = ec2_ops.console_output(ec2, IID)
    assert "\x1b" not in text and "\x07" not in text and "\n" not in text
    assert "Booting" in text and "\\x1b" in text
    ec2.stub.add_client_error("get_console_output", "UnauthorizedOperation", "no")
    assert ec2_ops.console_output(ec2, IID) == ""


def test_boot_watch_requests_and_a_panic_on_the_console(ec2):
    from imagelint.aws.boot import BootWatch

    raw = "[    2.5] Kernel panic - not syncing: VFS: Unable to mount root fs\x1b[2J\n"
    ec2.stub.add_response("describe_instances", _instance("running"), {"InstanceIds": [IID]})
    ec2.stub.add_response(
        "get_console_output",
        {"InstanceId": IID, "Output": base64.b64encode(raw.encode()).decode()},
        {"InstanceId": IID, "Latest": True},
    )
    reason = BootWatch(ec2, IID, every=0).doomed()
    assert reason == "the kernel panicked (Kernel panic - not syncing: VFS: Unable to mount root fs\\x1b[2J)"
    stopped = _instance(
        "stopped", StateReason={"Code": "Client.UserInitiatedShutdown", "Message": "shut down"}
    )
    ec2.stub.add_response("describe_instances", stopped, {"InstanceIds": [IID]})
    assert BootWatch(ec2, IID, every=0).doomed() == "the instance is stopped (shut down)"


def test_no_default_vpc_lists_subnets_across_pages(ec2):
    ec2.stub.add_response(
        "describe_vpcs", {"Vpcs": []}, {"Filters": [{"Name": "isDefault", "Values": ["true"]}]}
    )
    ec2.stub.add_response(
        "describe_subnets", {"Subnets": [{"SubnetId": "subnet-a", "VpcId": "vpc-1"}], "NextToken": "t"}, {}
    )
    ec2.stub.add_response(
        "describe_subnets", {"Subnets": [{"SubnetId": "subnet-b", "VpcId": "vpc-1"}]}, {"NextToken": "t"}
    )
    with pytest.raises(UsageError, match=r"no default VPC.*VPCIdNotSpecified.*subnet-a .*subnet-b "):
        preflight.check_subnet(ec2, None)
    ec2.stub.add_client_error("describe_subnets", "InvalidSubnetID.NotFound", "no")
    with pytest.raises(UsageError, match="--subnet subnet-x: no such subnet"):
        preflight.check_subnet(ec2, "subnet-x")


def test_instance_profile_checks(session):
    iam = session.client("iam")
    with Stubber(iam) as stub:
        stub.add_client_error(
            "get_instance_profile",
            "NoSuchEntity",
            "nope",
            http_status_code=404,
            expected_params={"InstanceProfileName": "ssm"},
        )
        with pytest.raises(UsageError, match="no such instance profile"):
            preflight.check_instance_profile(iam, "arn:aws:iam::123456789012:instance-profile/team/ssm")
        profile = {
            "Path": "/",
            "InstanceProfileName": "ssm",
            "InstanceProfileId": "AIPAEXAMPLE00000000",
            "Arn": "arn:aws:iam::123456789012:instance-profile/ssm",
            "CreateDate": datetime.now(UTC),
            "Roles": [],
        }
        stub.add_response(
            "get_instance_profile", {"InstanceProfile": profile}, {"InstanceProfileName": "ssm"}
        )
        with pytest.raises(UsageError, match="has no role"):
            preflight.check_instance_profile(iam, "ssm")


def test_bucket_not_writable_is_caught_before_launch(session):
    s3 = session.client("s3")
    with Stubber(s3) as stub:
        meta = {"HTTPHeaders": {"x-amz-bucket-region": "eu-west-1"}}
        stub.add_response("head_bucket", {"ResponseMetadata": meta}, {"Bucket": "b"})
        stub.add_client_error(
            "put_object",
            "AccessDenied",
            "denied",
            http_status_code=403,
            expected_params={
                "Bucket": "b",
                "Key": "p/run/run.json",
                "Body": ANY,
                "ContentType": "application/json",
            },
        )
        with pytest.raises(UsageError, match=r"cannot write p/run/run.json .*s3:PutObject"):
            preflight.check_bucket(s3, "b", "p/run/run.json", {"run_id": "run"})


def test_a_bucket_whose_kms_key_the_runner_cannot_decrypt_with_is_refused_before_launch(session):
    """SSE-KMS by default with a key policy that grants kms:GenerateDataKey but not kms:Decrypt: the
    PutObject succeeds and the GetObject of the same key is AccessDenied (S3 says so for a KMS
    refusal). The bundles would be unreadable after the boot and soak: refused up front, exit 2."""
    s3 = session.client("s3")
    with Stubber(s3) as stub:
        meta = {"HTTPHeaders": {"x-amz-bucket-region": "eu-west-1"}}
        stub.add_response("head_bucket", {"ResponseMetadata": meta}, {"Bucket": "b"})
        stub.add_response("put_object", {"ServerSideEncryption": "aws:kms"}, {
            "Bucket": "b", "Key": "p/run/run.json", "Body": ANY, "ContentType": "application/json",
        })  # fmt: skip
        message = "User is not authorized to perform: kms:Decrypt on the resource"
        stub.add_client_error(
            "get_object",
            "AccessDenied",
            message,
            http_status_code=403,
            expected_params={"Bucket": "b", "Key": "p/run/run.json"},
        )
        with pytest.raises(UsageError, match=r"cannot read it back \(AccessDenied: .*kms:Decrypt") as refused:
            preflight.check_bucket(s3, "b", "p/run/run.json", {"run_id": "run"})
    assert refused.value.exit_code == 2 and "\n" not in str(refused.value)


def test_missing_report_without_list_bucket_is_403_and_means_not_uploaded(session):
    s3 = session.client("s3")
    with Stubber(s3) as stub:
        stub.add_client_error(
            "get_object",
            "AccessDenied",
            "Access Denied",
            http_status_code=403,
            expected_params={"Bucket": "b", "Key": "k"},
        )
        with pytest.raises(AwsError) as caught:
            call(s3.get_object, Bucket="b", Key="k")
    assert missing_object(caught.value)


def test_execution_timeout_limit():
    preflight.check_execution_timeout(172800)
    with pytest.raises(UsageError, match="at most 172800s"):
        preflight.check_execution_timeout(172801)


def test_tags_over_the_limit_are_refused_before_the_call(ec2):
    image = _image()
    crowded = ec2_ops.ImageInfo(**{**image.__dict__, "tag_keys": frozenset(f"k{i}" for i in range(47))})
    with pytest.raises(UsageError, match="EC2 allows 50"):
        ec2_ops.tag_image(ec2, crowded, {"a": "1", "b": "2", "c": "3", "d": "4"})
    ec2.stub.add_response(
        "create_tags", {}, {"Resources": [AMI, "snap-1", "snap-2"], "Tags": [{"Key": "a", "Value": "1"}]}
    )
    ec2_ops.tag_image(ec2, crowded, {"a": "1"})
    with pytest.raises(UsageError, match="value of 257"):
        ec2_ops.validate_tags({"k": "v" * 257})
    with pytest.raises(UsageError, match="1 to 128"):
        ec2_ops.validate_tags({"k" * 129: "v"})


OWNER = "111122223333"


def _owned(ec2, *, snapshot_owners=(OWNER, OWNER)) -> None:
    """The replies --on-fail's ownership check gets: the AMI is this account's (Owners=self), its
    mapped snapshots owned by the accounts given."""
    mappings = [
        {"DeviceName": f"/dev/xvd{c}", "Ebs": {"SnapshotId": f"snap-{i + 1}"}} for i, c in enumerate("ab")
    ]
    image = {"ImageId": AMI, "OwnerId": OWNER, "BlockDeviceMappings": mappings}
    ec2.stub.add_response("describe_images", {"Images": [image]}, {"ImageIds": [AMI], "Owners": ["self"]})
    for i, owner in enumerate(snapshot_owners):
        snap = {"SnapshotId": f"snap-{i + 1}", "OwnerId": owner}
        ec2.stub.add_response("describe_snapshots", {"Snapshots": [snap]}, {"SnapshotIds": [f"snap-{i + 1}"]})


def test_deprecate_and_deregister_requests(ec2):
    ec2.stub.add_response(
        "describe_images", {"Images": [{"ImageId": AMI}]}, {"ImageIds": [AMI], "Owners": ["self"]}
    )
    ec2.stub.add_response("enable_image_deprecation", {"Return": True}, {"ImageId": AMI, "DeprecateAt": ANY})
    assert "deprecated from" in ec2_ops.act_on_failure(ec2, _image(), "deprecate")
    _owned(ec2)
    ec2.stub.add_response(
        "deregister_image", {"Return": True}, {"ImageId": AMI, "DeleteAssociatedSnapshots": True}
    )
    ec2.stub.add_response("delete_snapshot", {}, {"SnapshotId": "snap-1"})
    ec2.stub.add_client_error(
        "delete_snapshot", "InvalidSnapshot.InUse", "in use", expected_params={"SnapshotId": "snap-2"}
    )
    line = ec2_ops.act_on_failure(ec2, _image(), "deregister")
    assert "deleted snapshot(s) snap-1" in line and "kept snap-2" in line


def test_on_fail_acts_only_on_this_accounts_ami_and_snapshots(ec2):
    """An AMI this account does not own is refused, nothing called after the check; a mapped snapshot
    of another account is named and never deleted (the stubber fails on any call not queued)."""
    ec2.stub.add_response("describe_images", {"Images": []}, {"ImageIds": [AMI], "Owners": ["self"]})
    line = ec2_ops.act_on_failure(ec2, _image(), "deregister")
    assert line.startswith("--on-fail deregister refused:") and "not owned by this account" in line
    ec2.stub.add_response("describe_images", {"Images": []}, {"ImageIds": [AMI], "Owners": ["self"]})
    assert "refused" in ec2_ops.act_on_failure(ec2, _image(), "deprecate")
    _owned(ec2, snapshot_owners=(OWNER, "444455556666"))
    ec2.stub.add_response(
        "deregister_image", {"Return": True}, {"ImageId": AMI, "DeleteAssociatedSnapshots": True}
    )
    ec2.stub.add_response("delete_snapshot", {}, {"SnapshotId": "snap-1"})
    line = ec2_ops.act_on_failure(ec2, _image(), "deregister")
    assert "deleted snapshot(s) snap-1;" in line and "refused to delete snap-2" in line
    ec2.stub.assert_no_pending_responses()


def test_device_slot_skips_mapped_names(ec2, tmp_path):
    mapped = [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeId": "vol-a"}},
        {"DeviceName": "/dev/sdf", "Ebs": {}},
        {"DeviceName": "/dev/xvdg", "Ebs": {}},
    ]
    ec2.stub.add_response(
        "describe_instances", _instance("running", BlockDeviceMappings=mapped), {"InstanceIds": [IID]}
    )
    with device_slot(ec2, IID, tmp_path) as name:
        assert name == "/dev/sdh"


def test_device_slot_takes_the_lock_file_another_user_made(ec2, tmp_path):
    """The runner-wide lock is one file in a shared directory: a user who is not root takes the one a
    root run made (0644), and a symlink planted in its place is refused, not followed."""
    need(is_root(), "a lock file of another owner, then dropping to nobody, needs root")
    shared = Path(tempfile.mkdtemp(prefix="imagelint-lock-"))  # pytest's tmp_path is root's alone
    try:
        shared.chmod(0o1777)
        (shared / "imagelint-attach.lock").touch(mode=0o644)
        # one answer: the child consumes its copy of the queue, then this process its own
        ec2.stub.add_response("describe_instances", _instance("running"), {"InstanceIds": [IID]})
        child = os.fork()
        if child == 0:  # nobody, as a runner user would be
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                with device_slot(ec2, IID, shared) as name:
                    code = 0 if name == "/dev/sdf" else 2
            finally:
                os._exit(code)
        assert os.waitpid(child, 0)[1] == 0
        with device_slot(ec2, IID, shared) as name:  # and root the same file
            assert name == "/dev/sdf"
        (shared / "imagelint-attach.lock").unlink()
        (shared / "imagelint-attach.lock").symlink_to(tmp_path / "elsewhere")
        with pytest.raises(TargetError, match="cannot open the lock"), device_slot(ec2, IID, shared):
            pass
        assert not (tmp_path / "elsewhere").exists()
    finally:
        shutil.rmtree(shared)


def test_zone_outside_the_ami_region_is_refused(ec2):
    zones = {"AvailabilityZones": [{"ZoneName": "eu-west-1a"}, {"ZoneName": "eu-west-1b"}]}
    ec2.stub.add_response("describe_availability_zones", zones, {"AllAvailabilityZones": True})
    ec2_ops.check_zone(ec2, "eu-west-1b", _image())
    ec2.stub.add_response("describe_availability_zones", zones, {"AllAvailabilityZones": True})
    with pytest.raises(UsageError, match=r"runner is in us-east-1a, outside .* region eu-west-1"):
        ec2_ops.check_zone(ec2, "us-east-1a", _image())


def test_deregister_without_the_flag_on_an_older_botocore(ec2, monkeypatch):
    """botocore < 1.38.30 has no DeleteAssociatedSnapshots: the flag is left out, snapshots still go."""
    assert ec2_ops.knows(ec2, "DeregisterImage", "DeleteAssociatedSnapshots")  # this botocore has it
    assert not ec2_ops.knows(ec2, "DeregisterImage", "NoSuchParameter")
    monkeypatch.setattr(ec2_ops, "knows", lambda client, op, param: False)
    _owned(ec2)
    ec2.stub.add_response("deregister_image", {"Return": True}, {"ImageId": AMI})
    ec2.stub.add_response("delete_snapshot", {}, {"SnapshotId": "snap-1"})
    ec2.stub.add_response("delete_snapshot", {}, {"SnapshotId": "snap-2"})
    assert "deleted snapshot(s) snap-1, snap-2" in ec2_ops.act_on_failure(ec2, _image(), "deregister")


COMMAND_ID = "0b5d7a1c-1b2d-4c3e-9f4a-5b6c7d8e9f00"


def _plan(**extra):
    from imagelint.aws import ssm

    fields = {"run_id": "r", "bucket": "bkt", "prefix": "p/", "bucket_region": "eu-west-1", "version": "0"}
    url = "https://bkt/u?X-Amz-Signature=0"
    return ssm.RemotePlan(**{**fields, "instance_id": IID, "upload_url": url, **extra})


def _ssm_clients(session):
    from imagelint.aws.clients import Clients

    clients = Clients("eu-west-1", session)
    client = session.client("ssm")
    clients._cache["ssm"] = clients._cache["ssm/unretried/10"] = client
    return clients, client


def test_fleet_waves_size_the_deadline():
    from imagelint.commands import fleet

    assert fleet.concurrency_of("10%", 25) == 3 and fleet.concurrency_of("7", 25) == 7
    assert fleet.concurrency_of("1%", 5) == 1
    assert fleet.errors_allowed("0", 25) == 0 and fleet.errors_allowed("10%", 25) == 3
    with pytest.raises(UsageError, match="--max-concurrency"):
        fleet.concurrency_of("lots", 5)
    timing = fleet.FleetTiming(waves=9, wave_seconds=600 + 900)
    assert timing.total == 9 * 1500


def test_send_is_one_instance_its_own_url_and_survives_throttling(session):
    from imagelint.aws import ssm
    from imagelint.aws.errors import Backoff

    client = session.client("ssm")
    expected = {
        "InstanceIds": [IID],
        "DocumentName": "AWS-RunShellScript",
        "Parameters": ANY,
        "TimeoutSeconds": 900,
        "Comment": "imagelint run r",
        "MaxConcurrency": "1",
        "MaxErrors": "0",
    }
    waits: list[float] = []
    backoff = Backoff(first=0.5, sleep=waits.append)
    with Stubber(client) as stub:
        stub.add_client_error(
            "send_command", "ThrottlingException", "Rate exceeded", expected_params=expected
        )
        stub.add_client_error(
            "send_command", "ThrottlingException", "Rate exceeded", expected_params=expected
        )
        stub.add_response("send_command", {"Command": {"CommandId": COMMAND_ID}}, expected)
        assert ssm.send(client, _plan(), delivery_timeout=900, backoff=backoff) == COMMAND_ID
    assert backoff.throttled == 2 and len(waits) == 2 and 0 <= waits[0] <= 0.5 and 0 <= waits[1] <= 1.0
    script = "\n".join(ssm.remote_script(_plan()))
    assert script.count("X-Amz-Signature") == 1 and f'[ "$IID" = {IID} ]' in script
    with Stubber(client) as stub:  # bounded: the last throttle is the error
        for _ in range(3):
            stub.add_client_error("send_command", "ThrottlingException", "Rate exceeded")
        with pytest.raises(AwsError, match="ThrottlingException"):
            ssm.send(client, _plan(), backoff=Backoff(attempts=3, sleep=waits.append))


def test_parameters_over_the_ssm_quota_are_refused_before_sending(session):
    from imagelint.aws import ssm

    client = session.client("ssm")
    big = _plan(collector_plan="path /etc/x\n" * 6000)
    with Stubber(client), pytest.raises(UsageError, match=r"bytes of parameters; SSM's 64 KB document quota"):
        ssm.send(client, big)  # no response queued: a call would fail differently
    assert ssm.check_parameters(ssm.parameters(_plan()), IID) < ssm.MAX_PARAMETERS


def test_fleet_asks_ssm_which_instances_it_manages_50_at_a_time(session):
    from imagelint.commands import fleet

    clients, client = _ssm_clients(session)
    ids = [f"i-{n:017x}" for n in range(60)]
    with Stubber(client) as stub:
        online = [{"InstanceId": i, "PingStatus": "Online", "PlatformType": "Linux"} for i in ids[:48]]
        lost = {"InstanceId": ids[49], "PingStatus": "ConnectionLost", "PlatformType": "Linux"}
        windows = {"InstanceId": ids[48], "PingStatus": "Online", "PlatformType": "Windows"}
        stub.add_response(
            "describe_instance_information",
            {"InstanceInformationList": [*online, windows, lost]},
            {"Filters": [{"Key": "InstanceIds", "Values": ids[:50]}], "MaxResults": 50},
        )
        stub.add_response(
            "describe_instance_information",
            {
                "InstanceInformationList": [
                    {"InstanceId": ids[50], "PingStatus": "Online", "PlatformType": "Linux"}
                ]
            },
            {"Filters": [{"Key": "InstanceIds", "Values": ids[50:]}], "MaxResults": 50},
        )
        managed, others = fleet._managed(clients, ids)
    assert managed == [*ids[:48], ids[50]]
    assert others[ids[49]] == ("not-managed", "not managed by SSM (SSM agent ConnectionLost): not covered")
    assert others[ids[51]] == ("not-managed", "not managed by SSM (no SSM agent registered): not covered")
    assert others[ids[48]] == ("not-linux", "not a Linux host (SSM PlatformType Windows): not covered")
    assert len(others) == 11


def test_rollout_polls_the_executing_commands_then_their_invocations(session):
    from imagelint.aws.errors import Backoff
    from imagelint.commands import fleet

    clients, client = _ssm_clients(session)
    rollout = fleet.Rollout(
        clients, {IID: _plan()}, window=1, errors_allowed=0, per_command=60, poll=0, backoff=Backoff()
    )
    rollout.queue, rollout.commands, rollout.running = [], {IID: COMMAND_ID}, {IID: 1e18}
    filters = [
        {"key": "InvokedAfter", "value": rollout.since},
        {"key": "ExecutionStage", "value": "Executing"},
    ]
    ping = (
        "describe_instance_information",
        {"InstanceInformationList": [{"InstanceId": IID, "PingStatus": "Online", "PlatformType": "Linux"}]},
        {"Filters": [{"Key": "InstanceIds", "Values": [IID]}], "MaxResults": 50},
    )
    with Stubber(client) as stub:
        stub.add_response("list_commands", {"Commands": [{"CommandId": COMMAND_ID}]}, {"Filters": filters})
        stub.add_response(*ping)  # its agent is still Online
        rollout._reap()  # still executing: no invocation asked
        stub.add_response("list_commands", {"Commands": []}, {"Filters": filters})
        stub.add_response(*ping)
        stub.add_response(
            "get_command_invocation",
            {"CommandId": COMMAND_ID, "InstanceId": IID, "Status": "Failed", "ResponseCode": 94},
            {"CommandId": COMMAND_ID, "InstanceId": IID},
        )
        rollout._reap()
        stub.assert_no_pending_responses()
    assert rollout.running == {} and rollout.ended[IID]["Status"] == "Failed" and rollout.failed == 1


def test_credential_lifetime_rules():
    from botocore.credentials import Credentials, RefreshableCredentials

    from imagelint.aws import credentials

    class Session:
        def __init__(self, creds):
            self.creds = creds

        def get_credentials(self):
            return self.creds

    assert credentials.seconds_left(Session(Credentials("AK", "SK"))) is None  # long-term keys
    assert credentials.seconds_left(Session(Credentials("AK", "SK", "token"))) == 3600.0
    expiry = datetime.now(UTC).replace(microsecond=0)
    from datetime import timedelta

    refreshable = RefreshableCredentials("AK", "SK", "T", expiry + timedelta(hours=3), lambda: {}, "test")
    left = credentials.seconds_left(Session(refreshable))
    assert left is not None and 3 * 3600 - 60 < left <= 3 * 3600
    credentials.check_lifetime(Session(refreshable), 7200, role=True)
    token = Session(Credentials("AK", "SK", "token"))
    with pytest.raises(UsageError, match="expire in"):
        credentials.check_lifetime(token, 7200, role=False)
    # --credentials-expire-at: the user says how long a token of unknown expiry lasts
    later = credentials.parse_expiry((expiry + timedelta(hours=3)).isoformat())
    credentials.check_lifetime(token, 7200, role=False, expires_at=later)
    soon = credentials.parse_expiry((expiry + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    with pytest.raises(UsageError, match=r"expire in \d+s \(--credentials-expire-at\)"):
        credentials.check_lifetime(Session(Credentials("AK", "SK")), 7200, role=False, expires_at=soon)
    # the earlier of what botocore knows and what the user says
    assert credentials.seconds_left(Session(refreshable), expires_at=soon) < 1900
    with pytest.raises(UsageError, match="with its zone"):
        credentials.parse_expiry("2026-12-03T21:40:00")


# the deadline tag is the clock's (deadline_after): fixed here, or the request the stub expects and
# the one sent differ whenever a second passes between the two (seen on a loaded machine)
FIXED_DEADLINE = ec2_ops.deadline_after(3600, datetime(2026, 1, 1, tzinfo=UTC))


def _dry_run_params(settings: ec2_ops.LaunchSettings) -> dict:
    return {**ec2_ops.launch_params(_image(), settings, "run-1"), "DryRun": True}


def test_the_dry_run_sends_the_launch_request_and_goes_on_at_dry_run_operation(ec2):
    settings = ec2_ops.LaunchSettings(
        instance_type="m6i.large", tags=(("CostCenter", "cc"),), kms_key="arn:k", deadline=FIXED_DEADLINE
    )
    ec2.stub.add_client_error(
        "run_instances",
        service_error_code="DryRunOperation",
        service_message="Request would have succeeded, but DryRun flag is set.",
        expected_params=_dry_run_params(settings),
    )
    assert ec2_ops.dry_run_launch(ec2, _image(), settings, "run-1") is None


def test_a_refused_dry_run_carries_aws_message_and_where_to_look(ec2):
    settings = ec2_ops.LaunchSettings(instance_type="m6i.large", deadline=FIXED_DEADLINE)
    ec2.stub.add_client_error(
        "run_instances",
        service_error_code="UnauthorizedOperation",
        service_message="You are not authorized to perform this operation. Encoded authorization "
        "failure message: zz",
        expected_params=_dry_run_params(settings),
    )
    with pytest.raises(AwsError) as refused:
        ec2_ops.dry_run_launch(ec2, _image(), settings, "run-1")
    assert refused.value.exit_code == 3 and "\n" not in str(refused.value)
    assert "RunInstances (DryRun) failed: UnauthorizedOperation: You are not authorized" in str(refused.value)
    assert "failure message: zz" in str(refused.value) and "SCPs and tag policies" in str(refused.value)


def test_a_dry_run_an_endpoint_ignored_is_no_go(ec2):
    """An endpoint that launched instead of answering DryRunOperation: the run stops (its cleanup
    finds the instance by the run tag)."""
    settings = ec2_ops.LaunchSettings(instance_type="m6i.large", deadline=FIXED_DEADLINE)
    ec2.stub.add_response("run_instances", {"Instances": [{"InstanceId": IID}]}, _dry_run_params(settings))
    with pytest.raises(AwsError, match="DryRunIgnored"):
        ec2_ops.dry_run_launch(ec2, _image(), settings, "run-1")


def test_the_volume_key_encrypts_every_ebs_mapping_and_the_tags_go_on_every_kind(ec2):
    settings = ec2_ops.LaunchSettings(
        instance_type="m6i.large", tags=(("CostCenter", "cc"),), kms_key="arn:k"
    )
    params = ec2_ops.launch_params(_image(), settings, "run-1")
    assert [m["Ebs"]["KmsKeyId"] for m in params["BlockDeviceMappings"]] == ["arn:k", "arn:k"]
    assert all(m["Ebs"]["Encrypted"] is True for m in params["BlockDeviceMappings"])
    kinds = {
        s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]} for s in params["TagSpecifications"]
    }
    assert set(kinds) == {"instance", "volume", "network-interface"}
    assert all(tags["CostCenter"] == "cc" and tags["imagelint:run"] == "run-1" for tags in kinds.values())
    plain = ec2_ops.launch_params(_image(), ec2_ops.LaunchSettings(instance_type="m6i.large"), "run-1")
    assert {s["ResourceType"] for s in plain["TagSpecifications"]} == {"instance", "volume"}
    assert not any("KmsKeyId" in m["Ebs"] for m in plain["BlockDeviceMappings"])
