"""Partitions from botocore's endpoint data: the printed policies and the managed policy the run
attaches name the region's partition (``arn:aws-cn:``, ``arn:aws-us-gov:``) and its endpoint suffix
(``amazonaws.com.cn`` in ``kms:ViaService``), never the commercial ``arn:aws:`` by habit."""

from __future__ import annotations

import json

import pytest

from imagelint.aws.partitions import partition_of
from imagelint.aws.policy import managed_policy_arn
from imagelint.aws.policy_fill import documents
from tests.support import run_cli


@pytest.mark.parametrize(
    ("region", "name", "suffix"),
    [
        ("eu-west-1", "aws", "amazonaws.com"),
        ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
        ("cn-northwest-1", "aws-cn", "amazonaws.com.cn"),
        ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
        ("us-gov-east-9", "aws-us-gov", "amazonaws.com"),  # a region botocore does not list yet
        (None, "aws", "amazonaws.com"),
    ],
)
def test_a_region_is_in_the_partition_botocore_puts_it_in(region: str | None, name: str, suffix: str) -> None:
    partition = partition_of(region)
    assert (partition.name, partition.dns_suffix) == (name, suffix)


def _strings(document: object) -> list[str]:
    if isinstance(document, dict):
        return [s for v in document.values() for s in _strings(v)]
    if isinstance(document, list):
        return [s for v in document for s in _strings(v)]
    return [document] if isinstance(document, str) else []


PARTITIONED = [
    ("cn-north-1", "aws-cn", ".amazonaws.com.cn"),
    ("us-gov-west-1", "aws-us-gov", ".amazonaws.com"),
]


@pytest.mark.parametrize(("region", "name", "suffix"), PARTITIONED)
def test_every_arn_and_via_service_is_the_partitions(region: str, name: str, suffix: str) -> None:
    strings = _strings(documents(region))
    arns = [s for s in strings if s.startswith("arn:")]
    assert len(arns) > 20 and all(s.startswith(f"arn:{name}:") for s in arns), arns
    via = [s for s in strings if s.startswith("ec2.*.")]
    assert via and all(s == f"ec2.*{suffix}" for s in via)
    assert managed_policy_arn(name) == f"arn:{name}:iam::aws:policy/AmazonSSMManagedInstanceCore"


def test_ami_policies_takes_the_region() -> None:
    proc = run_cli("ami", "policies", "--region", "cn-north-1", "instance-role-managed-policy")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == "arn:aws-cn:iam::aws:policy/AmazonSSMManagedInstanceCore"
    assert json.loads(run_cli("ami", "policies").stdout) == documents()  # no region: the commercial one
