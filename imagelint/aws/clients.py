"""boto3 clients for one region, built the standard way (credentials and endpoints from the environment).

No endpoint is hard-coded: ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_<SERVICE>`` (and the usual
credential chain) apply, which is also how the tests point the CLI at a local moto server.
``session`` is a boto3 session; ``--role-arn`` gives one whose credentials refresh themselves
(:mod:`imagelint.aws.credentials`), so a run outliving a one-hour session can still terminate what
it launched. :meth:`Clients.presigner` signs the instance's S3 URLs (:mod:`imagelint.aws.s3urls`).
Clients are made under one lock (a boto3 session is not thread-safe; its clients are), so threads
checking several AMIs at once may share them.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import field
from typing import Any

from imagelint.errors import UsageError
from imagelint.records import dataclass

_MAKING = threading.RLock()  # boto3 sessions are not thread-safe: clients are made one at a time
# botocore's adaptive mode: its standard retries (throttling, 5xx, dropped connections, with backoff)
# and a client-side rate that slows down when AWS throttles; ten attempts ride out a burst that four
# did not (a fleet's hundreds of SendCommand, an account's shared EC2 rate)
RETRIES = {"max_attempts": 10, "mode": "adaptive"}


@dataclass
class Clients:
    region: str
    session: Any = None
    _cache: dict[str, Any] = field(default_factory=dict)

    def get(self, service: str) -> Any:
        if service not in self._cache:
            self._cache[service] = self._make(service, dict(RETRIES))  # botocore rewrites the dict
        return self._cache[service]

    def _make(self, service: str, retries: dict[str, Any], pool: int = 10) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(retries=retries, connect_timeout=10, read_timeout=60, max_pool_connections=pool)
        with _MAKING:
            if self.session is None:
                self.session = boto3.session.Session()
            return self.session.client(service, region_name=self.region, config=config)

    def presigner(self, bucket: str, owner: str = "") -> Any:
        """The :class:`~imagelint.aws.s3urls.Presigner` of ``bucket`` (SigV4, the bucket's region;
        ``owner``: the account that must own it)."""
        key = f"presigner:{bucket}:{owner}"
        if key not in self._cache:
            from imagelint.aws.s3urls import presigner

            self._cache[key] = presigner(bucket, self.s3, self.session, owner)  # self.s3 sets self.session
        return self._cache[key]

    def unretried(self, service: str, pool: int = 10) -> Any:
        """A client with botocore's retries off, for callers that retry and count every attempt
        themselves (imagelint.aws.ebs_api, :class:`imagelint.aws.errors.Backoff`)."""
        key = f"{service}/unretried/{pool}"
        if key not in self._cache:
            self._cache[key] = self._make(service, {"total_max_attempts": 1}, pool)
        return self._cache[key]

    def ebs(self, pool: int) -> Any:
        """The EBS direct APIs client: retries off, a connection per concurrent block fetch."""
        return self.unretried("ebs", pool)

    @property
    def ec2(self) -> Any:
        return self.get("ec2")

    @property
    def ssm(self) -> Any:
        return self.get("ssm")

    @property
    def s3(self) -> Any:
        return self.get("s3")


# What botocore reads the region from: the environment, else the profile's in the config file.
REGION_SOURCES = ("AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "HOME")


def default_region(given: str | None) -> str:
    """--region, else the environment/config's region; refuse to guess. Resolved once per process
    for the same environment (a command asks for it once per image spec: a session each time)."""
    if given:
        return given
    region = _configured_region(tuple(os.environ.get(name) for name in REGION_SOURCES))
    if not region:
        raise UsageError("no AWS region: give --region or set AWS_REGION / AWS_DEFAULT_REGION")
    return region


@functools.lru_cache(maxsize=8)
def _configured_region(environment: tuple[str | None, ...]) -> str | None:
    """The region a boto3 session finds, given the environment it reads it from (the cache key)."""
    import boto3

    region = boto3.session.Session().region_name
    return str(region) if region else None
