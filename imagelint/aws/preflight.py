"""Pre-flight checks of `imagelint ami` and `fleet`: each fails in seconds, before anything launches,
with one line saying what to fix (exit 2), instead of a 10-minute wait that ends in exit 3.

- the run fits SSM's limit (``executionTimeout`` at most 172,800 s) and SigV4's 7-day URL limit;
- the credentials last the run (:func:`imagelint.aws.credentials.check_lifetime`);
- the report bucket exists (``HeadBucket``, which also gives its region) and is writable (a small
  ``PutObject`` of the run's ``run.json`` under the run's prefix);
- the instance profile exists and has a role (``iam:GetInstanceProfile``);
- a subnet is known: ``--subnet``, or the default VPC (``RunInstances`` answers
  ``VPCIdNotSpecified`` in an account without one; the error lists the subnets to choose from);
- the instance type runs the AMI's architecture (:func:`imagelint.aws.ec2.instance_type_for`).
"""

from __future__ import annotations

import json
from typing import Any

from imagelint.aws.errors import AwsError, call, paginate
from imagelint.errors import UsageError

SSM_MAX_EXECUTION_TIMEOUT = 172800  # seconds: AWS-RunShellScript's executionTimeout upper bound
SSM_MAX_DELIVERY_TIMEOUT = 2592000  # SendCommand TimeoutSeconds upper bound (30 days)


def check_execution_timeout(seconds: int) -> None:
    if seconds > SSM_MAX_EXECUTION_TIMEOUT:
        raise UsageError(
            f"the instance command needs executionTimeout {seconds}s; SSM allows at most "
            f"{SSM_MAX_EXECUTION_TIMEOUT}s (48 h): shorten --soak"
        )


def check_bucket(
    s3: Any, bucket: str, key: str, body: dict[str, Any], *, upload: dict[str, str] | None = None
) -> None:
    """The bucket answers HeadBucket, takes a PutObject (the run's ``run.json``) and gives it back:
    the bundles the hosts upload are read the same way at the end of the run, so a bucket whose KMS
    key the runner may encrypt with but not decrypt with is refused now, not after the boot and soak.
    ``upload``: the PutObject parameters the hosts' uploads are signed with (``ExpectedBucketOwner``,
    SSE-KMS, the ACL), sent here too, so a bucket policy that would refuse those uploads refuses this."""
    from imagelint.aws.s3urls import bucket_region

    upload = upload or {}
    owner = {k: v for k, v in upload.items() if k == "ExpectedBucketOwner"}
    bucket_region(s3, bucket, owner.get("ExpectedBucketOwner", ""))
    try:
        call(
            s3.put_object,
            Bucket=bucket,
            Key=key,
            Body=json.dumps(body).encode(),
            ContentType="application/json",
            **upload,
        )
    except AwsError as exc:
        encrypted = "SSEKMSKeyId" in upload
        policy = "" if encrypted else "; a bucket policy that demands SSE-KMS uploads needs --sse-kms-key KEY"
        raise UsageError(
            f"--report-bucket {bucket}: cannot write {key} ({exc.code}: {exc.detail}): the runner needs "
            "s3:PutObject on the bucket (and kms:GenerateDataKey when it is encrypted with a KMS key)"
            f"{policy}"
        ) from None
    try:
        call(s3.get_object, Bucket=bucket, Key=key, **owner)["Body"].close()
    except AwsError as exc:
        raise UsageError(
            f"--report-bucket {bucket}: wrote {key} but cannot read it back ({exc.code}: {exc.detail}): "
            "the runner needs s3:GetObject on the bucket (and kms:Decrypt on its KMS key) to read the "
            "hosts' bundles"
        ) from None


def profile_name(given: str) -> str:
    """The name of an instance profile given by name or ARN (``arn:…:instance-profile/path/NAME``)."""
    return given.rsplit("/", 1)[-1] if given.startswith("arn:") else given


def check_instance_profile(iam: Any, given: str) -> None:
    try:
        reply = call(iam.get_instance_profile, InstanceProfileName=profile_name(given))
    except AwsError as exc:
        if exc.code == "NoSuchEntity":
            raise UsageError(
                f"--instance-profile {given}: no such instance profile in this account; create it with a "
                "role that has AmazonSSMManagedInstanceCore (`imagelint ami check --help` has the policy)"
            ) from None
        raise
    if not reply["InstanceProfile"].get("Roles"):
        raise UsageError(
            f"--instance-profile {given}: it has no role, so the instance gets no credentials and SSM "
            "never sees it: add a role with AmazonSSMManagedInstanceCore"
        )


def check_subnet(ec2: Any, subnet: str | None) -> None:
    """``--subnet`` exists, or the region has a default VPC for RunInstances to use."""
    if subnet:
        try:
            call(ec2.describe_subnets, SubnetIds=[subnet])
        except AwsError as exc:
            if exc.code == "InvalidSubnetID.NotFound":
                raise UsageError(f"--subnet {subnet}: no such subnet in this region") from None
            raise
        return
    if paginate(ec2, "describe_vpcs", "Vpcs", Filters=[{"Name": "isDefault", "Values": ["true"]}]):
        return
    subnets = paginate(ec2, "describe_subnets", "Subnets")
    listed = ", ".join(
        f"{s['SubnetId']} ({s.get('VpcId', '?')}, {s.get('AvailabilityZone', '?')})" for s in subnets[:8]
    )
    more = f" and {len(subnets) - 8} more" if len(subnets) > 8 else ""
    raise UsageError(
        "this region has no default VPC, so RunInstances would answer VPCIdNotSpecified: give --subnet "
        "(one whose route table reaches the SSM and S3 endpoints, or VPC endpoints for them)"
        + (f"; subnets: {listed}{more}" if subnets else "; the account has no subnet here either")
    )
