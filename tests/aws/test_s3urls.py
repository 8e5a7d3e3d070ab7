"""Presigned URLs: the bucket's region from HeadBucket (every answer that carries it), SigV4 form,
expiry arithmetic and its 7-day cap; and a real PUT then GET through the URLs against moto's S3."""

from __future__ import annotations

import subprocess
import urllib.parse

import boto3
import pytest
from botocore.stub import Stubber

from imagelint.aws.clients import Clients
from imagelint.aws.errors import AwsError
from imagelint.aws.s3urls import SIGV4_MAX_EXPIRES, Presigner, bucket_region, run_expiry, signing_client
from imagelint.errors import UsageError


@pytest.fixture
def no_endpoint(monkeypatch: pytest.MonkeyPatch) -> boto3.session.Session:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")


def _stubbed(session: boto3.session.Session) -> tuple[object, Stubber]:
    client = session.client("s3", region_name="us-east-1")
    return client, Stubber(client)


@pytest.mark.parametrize("status", [200, 301, 400, 403])
def test_region_comes_from_every_headbucket_answer(no_endpoint, status):
    client, stub = _stubbed(no_endpoint)
    meta = {"HTTPHeaders": {"x-amz-bucket-region": "eu-central-1"}, "HTTPStatusCode": status}
    if status == 200:
        stub.add_response("head_bucket", {"ResponseMetadata": meta}, {"Bucket": "b"})
    else:
        code = {301: "PermanentRedirect", 400: "AuthorizationHeaderMalformed", 403: "AccessDenied"}[status]
        stub.add_client_error(
            "head_bucket",
            code,
            "",
            http_status_code=status,
            response_meta=meta,
            expected_params={"Bucket": "b"},
        )
    with stub:
        assert bucket_region(client, "b") == "eu-central-1"
    stub.assert_no_pending_responses()


def test_missing_bucket_and_denied_without_region_are_one_line(no_endpoint):
    client, stub = _stubbed(no_endpoint)
    stub.add_client_error(
        "head_bucket", "404", "Not Found", http_status_code=404, expected_params={"Bucket": "b"}
    )
    stub.add_client_error(
        "head_bucket", "403", "Forbidden", http_status_code=403, expected_params={"Bucket": "b"}
    )
    with stub:
        with pytest.raises(AwsError, match=r"does not exist.*--report-bucket"):
            bucket_region(client, "b")
        with pytest.raises(AwsError, match="s3:ListBucket"):
            bucket_region(client, "b")


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "eu-central-1", "ap-southeast-2"])
@pytest.mark.parametrize("method", ["get", "put"])
def test_urls_are_sigv4_in_the_bucket_region(no_endpoint, region, method):
    signer = Presigner("my-bucket", region, signing_client(region, no_endpoint, "my-bucket"))
    url = getattr(signer, f"{method}_url")("imagelint/run/i-1/bundle.tar", 7200)
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert query["X-Amz-Credential"].startswith("AKIDEXAMPLE/")
    assert query["X-Amz-Credential"].endswith(f"/{region}/s3/aws4_request")
    assert query["X-Amz-Expires"] == "7200"
    assert "X-Amz-Signature" in query and "Signature" not in query  # no SigV2 form
    assert parts.scheme == "https"
    # a regional endpoint (us-east-1's is the legacy global name, which is us-east-1 itself)
    assert parts.hostname == f"my-bucket.s3.{region}.amazonaws.com" or (
        region == "us-east-1" and parts.hostname == "my-bucket.s3.amazonaws.com"
    )
    assert parts.path == "/imagelint/run/i-1/bundle.tar"


def test_dotted_bucket_names_use_path_style(no_endpoint):
    url = Presigner("my.bucket", "eu-west-1", signing_client("eu-west-1", no_endpoint, "my.bucket")).get_url(
        "k", 60
    )
    assert url.startswith("https://s3.eu-west-1.amazonaws.com/my.bucket/k?")


def test_expiry_is_checked_both_ways(no_endpoint):
    signer = Presigner("b", "eu-west-1", signing_client("eu-west-1", no_endpoint))
    assert "X-Amz-Expires=604800" in signer.put_url("k", SIGV4_MAX_EXPIRES)
    with pytest.raises(UsageError, match="SigV4 allows"):
        signer.put_url("k", SIGV4_MAX_EXPIRES + 1)


def test_run_expiry_counts_waves():
    # 25 targets, 10 at a time: 3 waves of (soak 600 + margin 900)
    assert run_expiry(targets=25, concurrency=10, per_wave=1500, margin=1200) == 3 * 1500 + 1200
    assert run_expiry(per_wave=10) == 10
    with pytest.raises(UsageError, match="7 days"):
        run_expiry(targets=100, concurrency=1, per_wave=7200)


def test_urls_work_against_moto_in_another_region(moto_env, monkeypatch, tmp_path):
    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    moto_env.client("s3").create_bucket(
        Bucket="frankfurt", CreateBucketConfiguration={"LocationConstraint": "eu-central-1"}
    )
    clients = Clients("us-east-1")
    signer = clients.presigner("frankfurt")
    assert signer.region == "eu-central-1"
    bundle = tmp_path / "bundle"
    bundle.write_bytes(b"bundle bytes")
    # curl, as the instance's collector uses it
    subprocess.run(
        ["curl", "-fsS", "-T", str(bundle), signer.put_url("x/bundle", 600)], check=True, timeout=30
    )
    got = subprocess.run(
        ["curl", "-fsS", signer.get_url("x/bundle", 600)], check=True, capture_output=True, timeout=30
    )
    assert got.stdout == b"bundle bytes"
    assert (
        moto_env.client("s3").get_object(Bucket="frankfurt", Key="x/bundle")["Body"].read() == b"bundle bytes"
    )
    assert clients.presigner("frankfurt") is signer
