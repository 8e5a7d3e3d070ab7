"""Presigned S3 URLs for the instance (PUT of its bundle/reports, GET of the shipped inputs).

The instance reaches S3 only through these URLs (curl, no AWS SDK, no S3 permission in its
profile), so they must work on the first try in every region and for every bucket:

- **SigV4 always** (``signature_version="s3v4"``): botocore would otherwise sign SigV2 for
  us-east-1 and eu-west-1, which SSE-KMS objects and buckets created since 2020 refuse.
- **The bucket's own region**, read from ``HeadBucket``'s ``x-amz-bucket-region`` header (S3 sends
  it with 200 and also with the 301/400/403 answers a client in the wrong region or without
  ``s3:ListBucket`` gets). A URL for the global endpoint or signed for the wrong region answers 307
  or ``AuthorizationHeaderMalformed`` for new buckets.
- **Expiry that outlasts the run** (:func:`run_expiry`): SigV4 caps ``X-Amz-Expires`` at 7 days;
  asking for more is refused here rather than by S3 at upload time. A URL signed with temporary
  credentials also stops working when those credentials expire, whatever ``X-Amz-Expires`` says:
  :func:`imagelint.aws.credentials.check_lifetime` refuses such a run before launch.
"""

from __future__ import annotations

import math
from typing import Any

from imagelint.aws.errors import AwsError
from imagelint.errors import UsageError
from imagelint.records import dataclass

SIGV4_MAX_EXPIRES = 7 * 24 * 3600  # seconds: the longest X-Amz-Expires SigV4 accepts
REGION_HEADER = "x-amz-bucket-region"


def bucket_region(s3: Any, bucket: str, owner: str = "") -> str:
    """The bucket's region from ``HeadBucket`` (any answer that carries ``x-amz-bucket-region``);
    with ``owner``, S3 answers 403 unless that account owns the bucket (``ExpectedBucketOwner``)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        reply = s3.head_bucket(Bucket=bucket, **({"ExpectedBucketOwner": owner} if owner else {}))
        headers = reply.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    except ClientError as exc:
        headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if REGION_HEADER not in headers:
            code = str(exc.response.get("Error", {}).get("Code") or status)
            if code in ("404", "NoSuchBucket"):
                raise AwsError(
                    "s3",
                    "HeadBucket",
                    "NoSuchBucket",
                    f"bucket {bucket!r} does not exist",
                    "--report-bucket: create it first, or name an existing one",
                ) from None
            raise AwsError(
                "s3",
                "HeadBucket",
                code,
                f"bucket {bucket!r} answered {status} without its region",
                "IAM permission s3:ListBucket on the bucket, and the bucket policy",
            ) from None
    except BotoCoreError as exc:
        raise AwsError(
            "s3", "HeadBucket", type(exc).__name__, str(exc)[:300], "network access, region and credentials"
        ) from None
    region = headers.get(REGION_HEADER)
    if not region:
        raise AwsError(
            "s3",
            "HeadBucket",
            "NoRegion",
            f"bucket {bucket!r}: no {REGION_HEADER} header",
            "that the endpoint is S3",
        )
    return str(region)


def run_expiry(*, targets: int = 1, concurrency: int = 1, per_wave: float, margin: float = 0.0) -> int:
    """Seconds a URL must stay valid: ceil(targets / concurrency) waves of ``per_wave`` seconds, plus
    ``margin`` (launch and SSM wait); refused above SigV4's 7 days."""
    waves = math.ceil(max(1, targets) / max(1, concurrency))
    seconds = math.ceil(waves * per_wave + margin)
    if seconds > SIGV4_MAX_EXPIRES:
        raise UsageError(
            f"this run needs its presigned S3 URLs to live {seconds}s ({waves} wave(s) of {per_wave:.0f}s); "
            f"SigV4 allows at most {SIGV4_MAX_EXPIRES}s (7 days): shorten the soak or raise --max-concurrency"
        )
    return max(1, seconds)


@dataclass
class Presigner:
    """SigV4 URLs for one bucket, signed by a client in the bucket's region."""

    bucket: str
    region: str
    client: Any

    def get_url(self, key: str, expires: int) -> str:
        return self._sign("get_object", key, expires)

    def put_url(
        self,
        key: str,
        expires: int,
        metadata: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> str:
        """A PUT URL; with ``metadata``, S3 takes the upload only with those ``x-amz-meta-*`` headers
        and values (they are signed headers of the URL); ``params`` (PutObject's
        ``ServerSideEncryption``, ``SSEKMSKeyId``, ``ACL``, ``ExpectedBucketOwner``) are signed the
        same way: the upload must send their headers."""
        return self._sign("put_object", key, expires, metadata, params)

    def _sign(
        self,
        method: str,
        key: str,
        expires: int,
        metadata: dict[str, str] | None = None,
        extra: dict[str, str] | None = None,
    ) -> str:
        if not 1 <= expires <= SIGV4_MAX_EXPIRES:
            raise UsageError(f"presigned URL expiry {expires}s: SigV4 allows 1 to {SIGV4_MAX_EXPIRES}s")
        from imagelint.aws.errors import call

        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key, **(extra or {})}
        if metadata:
            params["Metadata"] = metadata
        return str(
            call(self.client.generate_presigned_url, ClientMethod=method, Params=params, ExpiresIn=expires)
        )


def signing_client(region: str, session: Any = None, bucket: str = "") -> Any:
    """An S3 client that signs SigV4 in ``region`` (credentials and endpoint from ``session``)."""
    import urllib.parse

    import boto3
    from botocore.config import Config

    factory = session if session is not None else boto3.session.Session()
    config = Config(signature_version="s3v4", retries={"max_attempts": 4, "mode": "standard"})
    # botocore presigns for the global endpoint (bucket.s3.amazonaws.com) unless given one, and
    # that name 307s for buckets outside us-east-1 in their first hours: pin the regional endpoint
    # the client resolved (or the endpoint the user configured, e.g. AWS_ENDPOINT_URL). On AWS's
    # own endpoints the URL is virtual-hosted (bucket.s3.REGION.amazonaws.com) unless the bucket
    # name has dots, which TLS would refuse there.
    endpoint = factory.client("s3", region_name=region, config=config).meta.endpoint_url
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host.endswith((".amazonaws.com", ".amazonaws.com.cn")) and "." not in bucket:
        config = config.merge(Config(s3={"addressing_style": "virtual"}))
    return factory.client("s3", region_name=region, config=config, endpoint_url=endpoint)


def presigner(bucket: str, probe: Any, session: Any = None, owner: str = "") -> Presigner:
    """A :class:`Presigner` for ``bucket``: ``probe`` (any S3 client) asks HeadBucket for the region
    (of ``owner``'s bucket only, when given)."""
    region = bucket_region(probe, bucket, owner)
    return Presigner(bucket, region, signing_client(region, session, bucket))
