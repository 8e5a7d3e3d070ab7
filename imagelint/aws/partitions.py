"""AWS partitions (aws, aws-cn, aws-us-gov, ...): what an ARN and a service endpoint look like there.

Read from botocore's own endpoint data, the table the SDK resolves endpoints with, so a region is in
the partition AWS puts it in: ``arn:aws-cn:`` and ``*.amazonaws.com.cn`` in China, ``arn:aws-us-gov:``
in GovCloud. The policies are written once for ``aws`` (:mod:`imagelint.aws.policy`) and rewritten
for a region's partition by :func:`for_partition`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from imagelint.records import dataclass

DEFAULT = "aws"
_DEFAULT_SUFFIX = "amazonaws.com"


@dataclass(frozen=True)
class Partition:
    name: str  # the ARN's second field
    dns_suffix: str  # of the service endpoints: ec2.REGION.SUFFIX


@functools.cache
def _partitions() -> tuple[tuple[Partition, re.Pattern[str], frozenset[str]], ...]:
    from botocore.loaders import create_loader

    data = create_loader().load_data("endpoints")
    return tuple(
        (Partition(p["partition"], p["dnsSuffix"]), re.compile(p["regionRegex"]), frozenset(p["regions"]))
        for p in data["partitions"]
    )


def partition_of(region: str | None) -> Partition:
    """The partition of ``region`` (the commercial one when no region is given or none matches)."""
    if region:
        known = _partitions()
        for partition, _, regions in known:
            if region in regions:
                return partition
        for partition, pattern, _ in known:
            if pattern.match(region):
                return partition
    return Partition(DEFAULT, _DEFAULT_SUFFIX)


def for_partition(document: Any, partition: Partition) -> Any:
    """A policy document written for ``aws``, for ``partition``: every ``arn:aws:`` and every service
    endpoint name (``ec2.*.amazonaws.com`` in ``kms:ViaService``) rewritten; nothing else changes."""
    if isinstance(document, dict):
        return {key: for_partition(value, partition) for key, value in document.items()}
    if isinstance(document, list):
        return [for_partition(value, partition) for value in document]
    if isinstance(document, str):
        if document.startswith(f"arn:{DEFAULT}:"):
            return f"arn:{partition.name}:" + document[len(DEFAULT) + 5 :]
        if document.endswith(f".*.{_DEFAULT_SUFFIX}"):
            return document[: -len(_DEFAULT_SUFFIX)] + partition.dns_suffix
    return document
