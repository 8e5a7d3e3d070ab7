"""boto3 clients for one region, built the standard way (credentials and endpoints from the environment).

No endpoint is hard-coded: ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_<SERVICE>`` (and the usual
credential chain) apply, which is also how the tests point the CLI at a local moto server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imagelint.errors import UsageError


@dataclass
class Clients:
    region: str
    _cache: dict[str, Any] = field(default_factory=dict)

    def get(self, service: str) -> Any:
        if service not in self._cache:
            self._cache[service] = self._make(service, {"max_attempts": 4, "mode": "standard"})
        return self._cache[service]

    def _make(self, service: str, retries: dict[str, Any], pool: int = 10) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(retries=retries, connect_timeout=10, read_timeout=60, max_pool_connections=pool)
        return boto3.client(service, region_name=self.region, config=config)

    def ebs(self, pool: int) -> Any:
        """The EBS direct APIs client: botocore's retries off (imagelint.aws.ebs_api retries and counts
        every attempt), a connection per concurrent block fetch."""
        key = f"ebs/{pool}"
        if key not in self._cache:
            self._cache[key] = self._make("ebs", {"total_max_attempts": 1}, pool)
        return self._cache[key]

    @property
    def ec2(self) -> Any:
        return self.get("ec2")

    @property
    def ssm(self) -> Any:
        return self.get("ssm")

    @property
    def s3(self) -> Any:
        return self.get("s3")


def default_region(given: str | None) -> str:
    """--region, else the environment/config's region; refuse to guess."""
    if given:
        return given
    import boto3

    region = boto3.session.Session().region_name
    if not region:
        raise UsageError("no AWS region: give --region or set AWS_REGION / AWS_DEFAULT_REGION")
    return str(region)
