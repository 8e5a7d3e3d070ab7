"""Can the instance reach SSM and S3 from its subnet? Checked before launch, from the route table.

The instance needs HTTPS to ``ssm``, ``ssmmessages``, ``ec2messages`` (the SSM agent) and S3 (the
bundle upload, the command output). For the launch subnet (``--subnet``, or each default subnet of
the default VPC, where RunInstances picks one), its route table is the one explicitly associated
with it, else the VPC's main table. Then, per subnet:

- an active ``0.0.0.0/0`` route to a NAT gateway, a NAT instance (an instance or network interface
  target) or a transit gateway is a path to everything; to an internet gateway too, when the
  subnet gives the instance a public IPv4 address (``MapPublicIpOnLaunch``; the launch asks for
  none itself);
- otherwise each service needs a VPC endpoint: interface endpoints
  ``com.amazonaws.REGION.ssm`` / ``.ssmmessages`` / ``.ec2messages`` that are ``available`` with
  private DNS (without it the agent's regional host names resolve to the public endpoints), and
  for S3 a gateway endpoint associated with this route table, or an interface endpoint with
  private DNS.

Missing pieces → exit 2 before launch, naming them. Where the path may exist in a way this cannot
see (a default route to a virtual private gateway, a peering connection, a local or carrier
gateway, a Cloud WAN core network; only an IPv6 default route) the run goes ahead with a warning
that says which, and which endpoints would be missing without it. Endpoints that cover all four
services make any route irrelevant.
The security groups, network ACLs and DNS on the way are judged apart (:mod:`imagelint.aws.network_rules`).
"""

from __future__ import annotations

from typing import Any

from imagelint.aws.errors import paginate
from imagelint.errors import UsageError
from imagelint.records import dataclass

SSM_SERVICES = ("ssm", "ssmmessages", "ec2messages")
# default-route targets that count as a path to the AWS endpoints; and those it cannot see through
PATH_TARGETS = ("NatGatewayId", "TransitGatewayId", "InstanceId", "NetworkInterfaceId")
OPAQUE_TARGETS = ("VpcPeeringConnectionId", "LocalGatewayId", "CarrierGatewayId", "CoreNetworkArn")


@dataclass(frozen=True)
class Placement:
    """Where the instance will be: its VPC and the subnets RunInstances may put it in."""

    vpc_id: str
    subnets: tuple[dict[str, Any], ...]
    given: bool  # --subnet, or the default VPC's default subnets


def placement(ec2: Any, subnet: str | None) -> Placement:
    """``--subnet``'s VPC, or the default VPC's default subnets (checked to exist by
    :func:`imagelint.aws.preflight.check_subnet` before)."""
    if subnet:
        found = paginate(ec2, "describe_subnets", "Subnets", SubnetIds=[subnet])
        return Placement(found[0]["VpcId"], (found[0],), True)
    vpcs = paginate(ec2, "describe_vpcs", "Vpcs", Filters=[{"Name": "isDefault", "Values": ["true"]}])
    vpc_id = vpcs[0]["VpcId"]
    subnets = paginate(
        ec2,
        "describe_subnets",
        "Subnets",
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "default-for-az", "Values": ["true"]}],
    )
    return Placement(vpc_id, tuple(subnets), False)


def route_table(ec2: Any, subnet: dict[str, Any]) -> dict[str, Any] | None:
    """The subnet's route table: its explicit association, else its VPC's main table."""
    explicit = paginate(
        ec2,
        "describe_route_tables",
        "RouteTables",
        Filters=[{"Name": "association.subnet-id", "Values": [subnet["SubnetId"]]}],
    )
    if explicit:
        return dict(explicit[0])
    main = paginate(
        ec2,
        "describe_route_tables",
        "RouteTables",
        Filters=[
            {"Name": "vpc-id", "Values": [subnet["VpcId"]]},
            {"Name": "association.main", "Values": ["true"]},
        ],
    )
    return dict(main[0]) if main else None


@dataclass(frozen=True)
class Verdict:
    """One subnet's answer: what is missing (refuse), what could not be seen through (warn), and
    a note on why the default route is no path (it goes with the refusal)."""

    subnet: str
    missing: tuple[str, ...] = ()
    unsure: tuple[str, ...] = ()
    note: str = ""


def _default_routes(table: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    active = [r for r in table.get("Routes", []) if r.get("State", "active") == "active"]
    v4 = [r for r in active if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
    v6 = [r for r in active if r.get("DestinationIpv6CidrBlock") == "::/0"]
    return v4, v6


def judge(
    subnet: dict[str, Any],
    table: dict[str, Any] | None,
    endpoints: list[dict[str, Any]],
    region: str,
    bucket_region: str | None = None,
) -> Verdict:
    """Whether an instance in ``subnet`` (routed by ``table``) reaches SSM and S3, and the report
    bucket in ``bucket_region`` (a VPC endpoint reaches only its own region's buckets); pure, for tests."""
    sid = subnet["SubnetId"]
    if table is None:
        return Verdict(sid, unsure=(f"{sid}: no route table found (not even the VPC's main one)",))
    v4, v6 = _default_routes(table)
    public = bool(subnet.get("MapPublicIpOnLaunch"))
    unsure: list[str] = []
    note = ""
    for route in v4:
        gateway = str(route.get("GatewayId") or "")
        if any(route.get(k) for k in PATH_TARGETS) or (gateway.startswith("igw-") and public):
            return Verdict(sid)
        if gateway.startswith("igw-"):
            note = f"its default route goes to {gateway}, but the subnet gives no public IPv4 address"
        else:
            target = gateway or next((str(route[k]) for k in OPAQUE_TARGETS if route.get(k)), "?")
            unsure.append(f"{sid}: its default route goes to {target}, which this check cannot see through")
    for route in v6:
        target = route.get("GatewayId") or route.get("EgressOnlyInternetGatewayId") or "?"
        unsure.append(f"{sid}: only an IPv6 default route (to {target}) may get out")
    table_id = table.get("RouteTableId", "?")
    missing = [
        f"com.amazonaws.{region}.{name}"
        for name in SSM_SERVICES
        if not _interface(endpoints, f"com.amazonaws.{region}.{name}")
    ]
    s3 = f"com.amazonaws.{region}.s3"
    gateway_s3 = any(
        e.get("VpcEndpointType") == "Gateway"
        and _named(e, s3)
        and _available(e)
        and table_id in e.get("RouteTableIds", [])
        for e in endpoints
    )
    if not gateway_s3 and not _interface(endpoints, s3):
        missing.append(f"{s3} (a gateway endpoint on {table_id}, or an interface endpoint)")
    elif bucket_region and bucket_region != region:
        missing.append(
            f"a route to S3 in {bucket_region}, the report bucket's region: an S3 endpoint reaches only "
            f"buckets in {region} (a NAT or internet route, or a bucket in {region})"
        )
    if not missing:
        return Verdict(sid)
    if unsure:
        # a path may exist that this cannot see: say what would be missing without it, do not refuse
        unsure.append(f"{sid}: without that path it would need VPC endpoints {', '.join(missing)}")
        return Verdict(sid, unsure=tuple(unsure))
    return Verdict(sid, missing=tuple(missing), note=note)


def _available(endpoint: dict[str, Any]) -> bool:
    return str(endpoint.get("State", "")).lower() == "available"


def _named(endpoint: dict[str, Any], service: str) -> bool:
    """The endpoint serves ``service`` (``com.amazonaws.REGION.NAME``), under its own name or the
    ``cn.``-prefixed one several services have in the China regions."""
    return endpoint.get("ServiceName") in (service, f"cn.{service}")


def interface_endpoint(endpoints: list[dict[str, Any]], service: str) -> dict[str, Any] | None:
    """The available interface endpoint with private DNS that serves ``service``, if any."""
    return next(
        (
            e
            for e in endpoints
            if e.get("VpcEndpointType") == "Interface"
            and _named(e, service)
            and _available(e)
            and e.get("PrivateDnsEnabled")
        ),
        None,
    )


def _interface(endpoints: list[dict[str, Any]], service: str) -> bool:
    return interface_endpoint(endpoints, service) is not None


def check_reachability(
    ec2: Any, where: Placement, region: str, *, refuse: bool = True, bucket_region: str | None = None
) -> list[str]:
    """Refuse (exit 2) a launch whose subnet cannot reach SSM and S3; return warnings to print.

    Without ``--subnet`` RunInstances picks one of the default VPC's default subnets: refused only
    when none of them has a path, warned when some lack one. ``refuse=False`` (``--skip-network-check``,
    for paths this check cannot see: endpoints in a shared VPC behind a transit gateway, resolved by a
    private hosted zone) makes the refusal a warning."""
    endpoints: list[dict[str, Any]] | None = None
    verdicts: list[Verdict] = []
    for subnet in where.subnets:
        table = route_table(ec2, subnet)
        if endpoints is None:
            endpoints = paginate(
                ec2,
                "describe_vpc_endpoints",
                "VpcEndpoints",
                Filters=[{"Name": "vpc-id", "Values": [where.vpc_id]}],
            )
        verdicts.append(judge(subnet, table, endpoints, region, bucket_region))
    warnings = [line for v in verdicts for line in v.unsure]
    blocked = [v for v in verdicts if v.missing]
    if blocked and len(blocked) == len(verdicts):
        first = blocked[0]
        which = first.subnet if where.given else f"the default VPC's subnets ({len(blocked)})"
        why = first.note or "no default route to a NAT, transit or internet gateway"
        refusal = (
            f"{which} cannot reach SSM and S3 ({why}) and the VPC has no endpoint "
            f"{', '.join(first.missing)}: add them (private DNS on), or give a --subnet with a path "
            "(`imagelint ami check --help`)"
        )
        if refuse:
            raise UsageError(refusal + "; --skip-network-check if a path exists that this cannot see")
        return [*warnings, f"{refusal}; going on (--skip-network-check)"]
    warnings += [
        f"{v.subnet} cannot reach SSM and S3 (no endpoint {', '.join(v.missing)}); RunInstances may pick it: "
        "give --subnet"
        for v in blocked
    ]
    return warnings


def public_ip_needed(
    ec2: Any, where: Placement, region: str, *, bucket_region: str | None = None
) -> bool | None:
    """Whether the instance needs the public IPv4 address its ``--subnet`` gives by default
    (``MapPublicIpOnLaunch``): only when its path to SSM and S3 is an internet gateway. A subnet
    that gets there without one (a NAT or transit gateway, VPC endpoints) launches with none
    (Security Hub EC2.9). None: not ours to decide (no ``--subnet``, or the subnet gives none)."""
    if not where.given or not where.subnets[0].get("MapPublicIpOnLaunch"):
        return None
    subnet = where.subnets[0]
    endpoints = paginate(
        ec2, "describe_vpc_endpoints", "VpcEndpoints", Filters=[{"Name": "vpc-id", "Values": [where.vpc_id]}]
    )
    private = judge(
        {**subnet, "MapPublicIpOnLaunch": False}, route_table(ec2, subnet), endpoints, region, bucket_region
    )
    return bool(private.missing or private.unsure)
