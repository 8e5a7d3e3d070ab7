"""AWS call failures as one line: the API, the error code, and what to check.

Every boto3 call of the AWS flows goes through :func:`call`, so a denied permission, an exhausted
quota or an unreachable endpoint ends the run with a line such as

    ec2 RunInstances failed: UnauthorizedOperation: You are not authorized ...
    (check: IAM permission ec2:RunInstances)

and exit code 3 (the image was not checked), never a traceback. :class:`Backoff` retries a call AWS
throttled, a bounded number of times, on a client whose own retries are off
(:meth:`imagelint.aws.clients.Clients.unretried`), and counts the throttles it survived.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import Any, TypeVar

from imagelint.aws.signals import sdk_call
from imagelint.errors import ExitCode, ImageLintError
from imagelint.records import dataclass

T = TypeVar("T")

# What to check for the error codes people actually meet.
_HINTS: dict[str, str] = {
    "UnauthorizedOperation": "IAM permission {service}:{api} for the caller",
    "AccessDenied": "IAM permission {service}:{api} for the caller (and the bucket policy for S3)",
    "AccessDeniedException": "IAM permission {service}:{api} for the caller",
    "InstanceLimitExceeded": "the EC2 instance quota of the account/region (Service Quotas)",
    "VcpuLimitExceeded": "the vCPU quota of the account/region (Service Quotas)",
    "InsufficientInstanceCapacity": "another --instance-type or --subnet (availability zone)",
    "InvalidAMIID.NotFound": "the AMI id and the --region it lives in",
    "InvalidAMIID.Malformed": "the AMI id (ami-xxxxxxxx)",
    "InvalidSubnetID.NotFound": "--subnet and --region",
    "InvalidGroup.NotFound": "--security-group and --region",
    "InvalidParameterValue": "the value named in the message",
    "NoSuchEntity": "--instance-profile: it must exist and carry AmazonSSMManagedInstanceCore",
    "InvalidIamInstanceProfile": "--instance-profile: it must exist and carry AmazonSSMManagedInstanceCore",
    "NoSuchBucket": "--report-bucket exists in this account and region",
    "NoSuchKey": "the instance wrote no report: see its command output",
    "InvalidInstanceId": "the instance is managed by SSM (agent running, instance profile attached)",
    "RequestExpired": "the clock of this machine",
    "ExpiredToken": "the session credentials: refresh them",
    "Throttling": "the API rate: retry later",
    "ThrottlingException": "the API rate: retry later, or lower --max-concurrency",
    "RequestLimitExceeded": "the API rate: retry later",
    "NotImplemented": "that the endpoint implements this API",
}


class AwsError(ImageLintError):
    """An AWS API call failed; the image was not (fully) checked."""

    exit_code = ExitCode.INCONCLUSIVE

    def __init__(self, service: str, api: str, code: str, detail: str, hint: str | None = None) -> None:
        self.service, self.api, self.code, self.detail = service, api, code, detail
        hint = hint or _HINTS.get(code, "credentials, region and IAM permission {service}:{api}")
        hint = hint.format(service=service, api=api)
        super().__init__(f"{service} {api} failed: {code}: {detail} (check: {hint})")


CREDENTIAL_CHAIN = (
    "the credential chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws/, "
    "a web identity token, the instance's or container's role"
)


def no_credentials(service: str, api: str) -> AwsError:
    """The one error for a run that found no AWS credentials at all (every door says the same)."""
    return AwsError(service, api, "NoCredentials", "no AWS credentials found", CREDENTIAL_CHAIN)


def _api_name(func: Callable[..., Any]) -> tuple[str, str]:
    client = getattr(func, "__self__", None)
    service = client.meta.service_model.service_name if client is not None else "aws"
    method = getattr(func, "__name__", "call")
    model = client.meta.method_to_api_mapping.get(method, method) if client is not None else method
    return service, model


def call(func: Callable[..., T], /, **kwargs: Any) -> T:
    """Call one boto3 client method; turn botocore's errors into :class:`AwsError`."""
    with converted(*_api_name(func)):
        return func(**kwargs)
    raise AssertionError("unreachable")  # converted() re-raises; mypy cannot see that


def paginate(client: Any, operation: str, key: str, /, **kwargs: Any) -> list[Any]:
    """Every item under ``key`` of every page of a Describe/List call (botocore's paginator)."""
    api = client.meta.method_to_api_mapping.get(operation, operation)
    items: list[Any] = []
    with converted(client.meta.service_model.service_name, api):
        for page in client.get_paginator(operation).paginate(**kwargs):
            items += page.get(key, [])
    return items


@contextlib.contextmanager
def converted(service: str, api: str) -> Iterator[None]:
    """botocore's exceptions inside become :class:`AwsError` (one line, the API and the code)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    from botocore.parsers import ResponseParserError

    try:
        with sdk_call():
            yield
    except NoCredentialsError:
        raise no_credentials(service, api) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))
        detail = " ".join(str(error.get("Message") or exc).split())[:300]
        raise AwsError(service, api, code, detail) from None
    except ResponseParserError as exc:
        # not an AWS reply at all (an HTML error page, a proxy, an endpoint without this API)
        detail = " ".join(str(exc).split())[:300]
        raise AwsError(service, api, "ResponseParserError", detail, _HINTS["NotImplemented"]) from None
    except BotoCoreError as exc:
        raise AwsError(
            service, api, type(exc).__name__, str(exc)[:300], "network access, region and credentials"
        ) from None


THROTTLED = frozenset(
    {"Throttling", "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded"}
)


@dataclass
class Backoff:
    """Bounded exponential backoff with full jitter for throttled calls: after the n-th throttled
    answer, sleep a random time up to ``min(cap, first * 2**(n-1))``; give up (the AwsError) after
    ``attempts`` calls. ``throttled`` counts the throttled answers (survived or not)."""

    attempts: int = 8
    first: float = 1.0
    cap: float = 20.0
    throttled: int = 0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    @property
    def longest(self) -> float:
        """Seconds one call can spend waiting between throttled attempts, at most."""
        return float(sum(min(self.cap, self.first * 2**attempt) for attempt in range(self.attempts - 1)))

    def call(self, func: Callable[..., T], /, **kwargs: Any) -> T:
        for attempt in range(self.attempts):
            try:
                return call(func, **kwargs)
            except AwsError as exc:
                if exc.code not in THROTTLED:
                    raise
                self.throttled += 1
                if attempt == self.attempts - 1:
                    raise
                self.sleep(self.delay(attempt))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def delay(self, attempt: int) -> float:
        """The wait after the ``attempt``-th (from 0) throttled answer: full jitter."""
        return random.uniform(0, min(self.cap, self.first * 2**attempt))


def missing_object(exc: AwsError) -> bool:
    """A GetObject of a key that is not there: 404 ``NoSuchKey``, or 403 ``AccessDenied`` when the
    caller lacks ``s3:ListBucket`` (S3 then hides whether the key exists). For a report the
    instance should have written, both mean the same thing: the instance did not upload it."""
    return exc.service == "s3" and exc.code in ("NoSuchKey", "404", "AccessDenied", "403")


def waiter_error(service: str, api: str, exc: Exception, what: str) -> AwsError:
    """A boto3 waiter gave up or hit a failure state."""
    return AwsError(service, api, "WaiterError", " ".join(str(exc).split())[:300], what)
