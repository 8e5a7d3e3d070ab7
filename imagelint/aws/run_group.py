"""The per-run security group of `imagelint ami` launch mode (used unless ``--security-group`` is given).

Without a group of its own the instance gets its VPC's ``default`` group, which hardened accounts
(CIS AWS Foundations 5.4, Security Hub control EC2.2) leave with no rule at all: the SSM agent
never reaches SSM and the run would end blaming the image. So each run creates a group in the
launch subnet's VPC, named ``imagelint-<run id>`` and tagged ``imagelint:run=<run id>`` on the create
call (:func:`imagelint.aws.ec2.run_tags`), removes the egress rules a new group starts with (all
traffic to ``0.0.0.0/0``, and to ``::/0`` in a VPC with IPv6), and allows only HTTPS (tcp/443) out, to
``0.0.0.0/0`` and ``::/0`` (an IPv6 rule needs no IPv6 in the VPC); no ingress. SSM, its message
endpoints and S3 are all HTTPS. In a VPC whose DHCP options name DNS servers of its own
(:mod:`imagelint.aws.vpc_dns`), UDP and TCP 53 to each of them too: the agent resolves the endpoints'
names there. The Amazon resolver (``AmazonProvidedDNS``) needs no rule: security groups do not filter
it (Amazon VPC User Guide, "Internetwork traffic privacy in Amazon VPC": they "don't filter traffic to
or from link-local addresses (169.254.0.0/16) or AWS reserved IPv4 addresses (...) including the
Amazon DNS server address for the VPC").

The group is deleted after the run's instances are terminated. For a while after termination the
instance's network interface still holds the group and ``DeleteSecurityGroup`` answers
``DependencyViolation``: that answer is retried with bounded backoff; a group still held after that
is left with a warning (security groups cost nothing) for ``imagelint ami cleanup``, which finds it
by the run tag, as the run's own final sweep does for a group whose create reply was lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from imagelint.aws.ec2 import RUN_TAG, run_tags
from imagelint.aws.errors import AwsError, call, paginate

HTTPS_EGRESS = [
    {
        "IpProtocol": "tcp",
        "FromPort": 443,
        "ToPort": 443,
        "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "imagelint: SSM and S3 over HTTPS"}],
        "Ipv6Ranges": [{"CidrIpv6": "::/0", "Description": "imagelint: SSM and S3 over HTTPS"}],
    }
]
DNS_DESCRIPTION = "imagelint: DNS to the VPC's own DNS server"
IN_USE_WAIT = 300.0  # seconds of DependencyViolation retries (an ENI can hold the group minutes)


def dns_egress(servers: tuple[str, ...]) -> list[dict[str, Any]]:
    """UDP and TCP 53 to each of the VPC's own DNS servers (IPv4 or IPv6 addresses), one host each."""
    ranges: dict[str, list[dict[str, str]]] = {}
    for server in servers:
        if ":" in server:
            ranges.setdefault("Ipv6Ranges", []).append(
                {"CidrIpv6": f"{server}/128", "Description": DNS_DESCRIPTION}
            )
        else:
            ranges.setdefault("IpRanges", []).append(
                {"CidrIp": f"{server}/32", "Description": DNS_DESCRIPTION}
            )
    if not ranges:
        return []
    return [{"IpProtocol": protocol, "FromPort": 53, "ToPort": 53, **ranges} for protocol in ("udp", "tcp")]


def group_name(run_id: str) -> str:
    return f"imagelint-{run_id}"


def create_run_group(
    ec2: Any,
    vpc_id: str,
    run_id: str,
    tags: tuple[tuple[str, str], ...] = (),
    *,
    deadline: str = "",
    dns_servers: tuple[str, ...] = (),
) -> str:
    """Create the run's group in ``vpc_id``: HTTPS egress only (and DNS to ``dns_servers``, the VPC's
    own: :func:`dns_egress`), no ingress; returns its id.

    The group carries the run tag and its ``deadline`` (:func:`imagelint.aws.ec2.run_tags`; and ``tags``,
    ``--resource-tag``) from its create call, so a failure in the rule calls that follow leaves a
    group the run's final sweep finds and deletes (and `ami cleanup`, once past its deadline)."""
    allowed = "HTTPS and DNS" if dns_servers else "HTTPS"
    reply = call(
        ec2.create_security_group,
        GroupName=group_name(run_id),
        Description=f"imagelint run {run_id}: {allowed} egress only, no ingress",
        VpcId=vpc_id,
        TagSpecifications=[
            {"ResourceType": "security-group", "Tags": run_tags(run_id, resource=tags, deadline=deadline)}
        ],
    )
    group_id = str(reply["GroupId"])
    groups = call(ec2.describe_security_groups, GroupIds=[group_id])["SecurityGroups"]
    defaults = [_bare(rule) for group in groups for rule in group.get("IpPermissionsEgress", [])]
    if defaults:
        call(ec2.revoke_security_group_egress, GroupId=group_id, IpPermissions=defaults)
    rules = HTTPS_EGRESS + dns_egress(dns_servers)
    call(ec2.authorize_security_group_egress, GroupId=group_id, IpPermissions=rules)
    return group_id


def _bare(rule: dict[str, Any]) -> dict[str, Any]:
    """An egress rule as DescribeSecurityGroups gives it, reduced to what RevokeSecurityGroupEgress
    matches on (empty lists dropped: the API refuses a rule that names no destination)."""
    keys = ("IpProtocol", "FromPort", "ToPort", "IpRanges", "Ipv6Ranges", "PrefixListIds", "UserIdGroupPairs")
    return {k: rule[k] for k in keys if k in rule and rule[k] != []}


def run_groups(ec2: Any, run_id: str | None = None) -> list[dict[str, Any]]:
    """The groups of one run (``run_id``) or of every run (None), by the run tag."""
    run_filter = (
        {"Name": f"tag:{RUN_TAG}", "Values": [run_id]} if run_id else {"Name": "tag-key", "Values": [RUN_TAG]}
    )
    return paginate(ec2, "describe_security_groups", "SecurityGroups", Filters=[run_filter])


def delete_group(ec2: Any, group_id: str, *, poll: float, wait: float = IN_USE_WAIT) -> bool:
    """Delete a group, retrying ``DependencyViolation`` (an ENI of a terminated instance still holds
    it) with bounded backoff for up to ``wait`` seconds; a group already gone counts as deleted.
    Returns False when it is still held at the end (the caller warns); other errors raise."""
    deadline = time.monotonic() + wait
    delay = max(0.05, poll)
    while True:
        try:
            call(ec2.delete_security_group, GroupId=group_id)
            return True
        except AwsError as exc:
            if exc.code == "InvalidGroup.NotFound":
                return True
            if exc.code != "DependencyViolation":
                raise
        if time.monotonic() + delay > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 15 * max(0.05, poll), 30.0)


def sweep_run_groups(
    ec2: Any,
    run_id: str,
    known: list[str],
    *,
    poll: float,
    log: Callable[[str], None],
    wait: float = IN_USE_WAIT,
) -> None:
    """Delete the run's groups: the one it created and any the run tag finds (a lost create reply).
    Called once the run's instances are terminated."""
    ids = set(known)
    try:
        ids |= {g["GroupId"] for g in run_groups(ec2, run_id)}
    except AwsError as exc:
        log(f"warning: could not list the run's security groups: {exc}")
    for group_id in sorted(ids):
        if delete_group(ec2, group_id, poll=poll, wait=wait):
            log(f"deleted security group {group_id}")
        else:
            log(
                f"warning: security group {group_id} is still in use after {wait:.0f}s (a network "
                "interface of the terminated instance); `imagelint ami cleanup` removes it later"
            )
