"""Is the instance type offered where the instance will be? Checked before launch.

An instance type is offered per availability zone (``DescribeInstanceTypeOfferings``, location type
``availability-zone``): a type a region has can still be missing from the zone of ``--subnet``, and
RunInstances then fails with ``Unsupported`` after the security group and the profile were made.
With ``--subnet``, its zone must offer the type; without it, RunInstances places the instance in one
of the default VPC's default subnets, and one of their zones must offer it. Otherwise: exit 2
before anything is created, naming the zones that do offer it.
"""

from __future__ import annotations

from typing import Any

from imagelint.aws.errors import paginate
from imagelint.aws.network import Placement
from imagelint.errors import UsageError


def zones_offering(ec2: Any, instance_type: str) -> set[str]:
    """The availability zones of the client's region that offer ``instance_type``."""
    offers = paginate(
        ec2,
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": [instance_type]}],
    )
    return {str(o["Location"]) for o in offers if o.get("InstanceType") == instance_type}


def check_offered(ec2: Any, instance_type: str, where: Placement) -> None:
    """Refuse a placement whose zone (``--subnet``) or zones (default subnets) do not offer
    ``instance_type``."""
    offered = zones_offering(ec2, instance_type)
    zones = {str(s["AvailabilityZone"]) for s in where.subnets}
    if zones & offered and not (where.given and zones - offered):
        return
    elsewhere = ", ".join(sorted(offered)) or "no zone of this region"
    subnets = ", ".join(str(s["SubnetId"]) for s in where.subnets)
    raise UsageError(
        f"--instance-type {instance_type} is not offered in {', '.join(sorted(zones - offered))} "
        f"(subnet {subnets}); it is offered in {elsewhere}: give a --subnet there or another "
        "--instance-type"
    )
