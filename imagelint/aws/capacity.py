"""Where the throwaway instance may go, and the launch moved on when EC2 has no room there.

``--instance-type`` and ``--subnet`` are repeatable, each in order of preference. The candidates are
the (type, subnet) pairs in this order: the first type in each subnet in turn, then the second type
in each subnet, and so on (a type is the user's sizing choice, a zone is not: a zone is given up
before a type). Without ``--subnet``, RunInstances picks a default subnet itself and only the types
vary. The pre-flight drops a pair whose zone does not offer its type
(``DescribeInstanceTypeOfferings``, :mod:`imagelint.aws.offerings`), and refuses the run (exit 2)
only when no pair is left. At most :data:`MAX_CANDIDATES` pairs (more is exit 2): the retry is
bounded.

A RunInstances answer that means "not here, not now" moves the launch on to the next candidate
(:data:`ELSEWHERE`):

- ``InsufficientInstanceCapacity``: the zone has no capacity for that type now (AWS's advice: another
  zone or type, or later);
- ``InsufficientFreeAddressesInSubnet``: the subnet has no free IP address; that subnet's later
  candidates are skipped too;
- ``Unsupported``: the type is not supported in that zone (what the offerings pre-flight could not
  see).

Every other answer ends the run at once (exit 3), as before: ``InstanceLimitExceeded`` and
``VcpuLimitExceeded`` are the account's quotas in the region, which no other subnet lifts; a refused
permission or a bad parameter is the same everywhere. A RunInstances that failed created nothing, so a
failed attempt leaves no instance, volume or network interface behind. Each attempt is kept
(:class:`Attempt`: the report's ``facts.launch.attempts``), and the error that ends the run names
every one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from imagelint.aws import network, network_rules, offerings
from imagelint.aws.ec2 import LaunchSettings
from imagelint.aws.errors import AwsError
from imagelint.errors import UsageError
from imagelint.records import dataclass

MAX_CANDIDATES = 12  # (type, subnet) pairs one launch may try
FULL_SUBNET = "InsufficientFreeAddressesInSubnet"
ELSEWHERE = frozenset({"InsufficientInstanceCapacity", FULL_SUBNET, "Unsupported"})
NO_ROOM_HINT = (
    "another --subnet (availability zone) or --instance-type, given again to be tried in order, or a "
    "later run; no instance was launched"
)


@dataclass(frozen=True)
class Candidate:
    """One place the instance may be launched: a type, a subnet (None: a default one) and its zone."""

    instance_type: str
    subnet: str | None
    zone: str = ""
    public_ip: bool | None = None  # the subnet's need (imagelint.aws.network.public_ip_needed)

    @property
    def label(self) -> str:
        where = self.subnet or "a default subnet"
        return f"{self.instance_type} in {where}" + (f" ({self.zone})" if self.zone else "")

    def applied(self, settings: LaunchSettings) -> LaunchSettings:
        """``settings`` launching here."""
        return dataclasses.replace(
            settings, instance_type=self.instance_type, subnet=self.subnet, public_ip=self.public_ip
        )


@dataclass(frozen=True)
class Attempt:
    """What one RunInstances of the launch answered."""

    candidate: Candidate
    result: str  # "launched", "skipped", or the error code
    detail: str = ""

    def to_dict(self) -> dict[str, str | None]:
        c = self.candidate
        return {
            "instance_type": c.instance_type,
            "subnet": c.subnet,
            "zone": c.zone or None,
            "result": self.result,
            "detail": self.detail or None,
        }

    @property
    def line(self) -> str:
        return f"{self.candidate.label}: {self.result}"


def preferences(settings: LaunchSettings) -> tuple[list[str | None], list[str | None]]:
    """The types (None: the AMI's default) and subnets (None: a default one) in order of preference,
    refused (exit 2) when one is given twice or the pairs are more than :data:`MAX_CANDIDATES`."""
    types: list[str | None] = [settings.instance_type, *settings.more_types]
    subnets: list[str | None] = [settings.subnet, *settings.more_subnets]
    for option, given in (("--instance-type", types), ("--subnet", subnets)):
        twice = sorted({str(v) for v in given if given.count(v) > 1})
        if twice:
            raise UsageError(f"{option} {', '.join(twice)}: given twice")
    if len(types) * len(subnets) > MAX_CANDIDATES:
        raise UsageError(
            f"{len(types)} --instance-type x {len(subnets)} --subnet = {len(types) * len(subnets)} places "
            f"to try: at most {MAX_CANDIDATES}"
        )
    return types, subnets


@dataclass(frozen=True)
class Placements:
    vpc_id: str  # the one VPC of every subnet (the run's security group is made there)
    candidates: tuple[Candidate, ...]
    judged: network_rules.Judged  # the network paths of every subnet (facts.network)


def plan(
    ec2: Any,
    types: list[str],
    subnets: list[str | None],
    region: str,
    *,
    bucket_region: str,
    refuse: bool,
    log: Callable[[str], None],
    groups: tuple[str, ...] = (),
) -> Placements:
    """The candidates in order of preference, each subnet's path to SSM and S3 checked
    (:func:`imagelint.aws.network.check_reachability`) and its filters judged
    (:func:`imagelint.aws.network_rules.check_filters`: a retry must not move to a subnet nobody
    judged), the pairs whose zone does not offer the type dropped; one VPC for every subnet (exit 2
    otherwise), and at least one pair (exit 2)."""
    wheres = [network.placement(ec2, subnet) for subnet in subnets]
    vpcs = sorted({where.vpc_id for where in wheres})
    if len(vpcs) > 1:
        raise UsageError(f"--subnet: the subnets are in {len(vpcs)} VPCs ({', '.join(vpcs)}): give one VPC's")
    public: dict[str | None, bool | None] = {}
    judged: list[network_rules.Judged] = []
    for subnet, where in zip(subnets, wheres, strict=True):
        for warning in network.check_reachability(
            ec2, where, region, refuse=refuse, bucket_region=bucket_region
        ):
            log(f"warning: {warning}")
        filters = network_rules.check_filters(
            ec2, where, region, groups=groups, refuse=refuse, bucket_region=bucket_region
        )
        for warning in filters.warnings:
            log(f"warning: {warning}")
        judged.append(filters)
        public[subnet] = network.public_ip_needed(ec2, where, region, bucket_region=bucket_region)
    kept: list[Candidate] = []
    first_refusal: UsageError | None = None
    for instance_type in types:
        for subnet, where in zip(subnets, wheres, strict=True):
            try:
                offerings.check_offered(ec2, instance_type, where)
            except UsageError as exc:
                first_refusal = first_refusal or exc
                if len(types) * len(subnets) > 1:
                    log(f"skipping {instance_type} in {subnet or 'the default subnets'}: {exc}")
                continue
            zone = str(where.subnets[0].get("AvailabilityZone", "")) if where.given else ""
            kept.append(Candidate(instance_type, subnet, zone, public[subnet]))
    if not kept:
        assert first_refusal is not None
        raise first_refusal
    every = network_rules.Judged(
        judged[0].dns,  # one VPC: one DNS
        judged=[line for one in judged for line in one.judged],
        not_judged=[line for one in judged for line in one.not_judged],
    )
    return Placements(vpcs[0], tuple(kept), every)


def launch_across(
    candidates: tuple[Candidate, ...], launch: Callable[[Candidate], str], log: Callable[[str], None]
) -> tuple[str, list[Attempt]]:
    """Launch at the first candidate that has room: the instance id and every attempt. An answer
    outside :data:`ELSEWHERE` is raised at once (with the attempts before it); when every candidate
    answered no room, one :class:`AwsError` names them all."""
    attempts: list[Attempt] = []
    full: set[str] = set()
    for candidate in candidates:
        if candidate.subnet in full:
            attempts.append(Attempt(candidate, "skipped", f"{candidate.subnet} has no free address"))
            continue
        try:
            instance_id = launch(candidate)
        except AwsError as exc:
            if exc.code not in ELSEWHERE:
                if attempts:
                    before = "; ".join(a.line for a in attempts)
                    raise AwsError(
                        exc.service, exc.api, exc.code, f"{exc.detail} ({candidate.label}, after {before})"
                    ) from None
                raise
            attempts.append(Attempt(candidate, exc.code, exc.detail))
            if exc.code == FULL_SUBNET and candidate.subnet:
                full.add(candidate.subnet)
            log(f"no room for {candidate.label}: {exc.code}")
            continue
        attempts.append(Attempt(candidate, "launched", instance_id))
        return instance_id, attempts
    tried = [a for a in attempts if a.result != "skipped"]
    raise AwsError(
        "ec2",
        "RunInstances",
        tried[-1].result if tried else "InsufficientInstanceCapacity",
        f"no room in any of {len(attempts)} place(s): " + "; ".join(a.line for a in attempts),
        NO_ROOM_HINT,
    )
