"""Whether AWS packet filters let one flow through, judged from their described rules; pure.

- a network ACL (``DescribeNetworkAcls``) is stateless and ordered: its entries of the flow's
  direction are read from the lowest rule number up, the first that matches a packet decides, and
  what no entry matches is denied (the ``*`` entry, rule 32767). Being stateless, the replies need a
  rule of their own: to the instance's ephemeral ports, which on Linux are 32768-61000 (Amazon VPC
  User Guide, "Ephemeral ports": "Many Linux kernels (including the Amazon Linux kernel) use ports
  32768-61000"; the image may set another range, which is not judged).
- security groups (``DescribeSecurityGroups``) are stateful and allow-only: a flow passes when any
  rule of any of the interface's groups allows it, and its replies with it.

A rule that covers only part of the far end's addresses (a narrower CIDR, a prefix list whose
entries are not read) decides nothing here: the answer is *not judged*, with the rule named, never
a pass or a refusal.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from imagelint.records import dataclass

EPHEMERAL = (32768, 61000)  # the Linux client's reply ports (see above)
ALL_PORTS = (0, 65535)
_NUMBERS = {"tcp": "6", "udp": "17"}
LAST_RULE = 32767  # the ``*`` entry every network ACL ends with


@dataclass(frozen=True)
class Flow:
    """Packets of ``protocol`` to ``ports`` of the far end ``cidr`` (or from it, for an inbound rule);
    ``what`` names it in messages."""

    protocol: str  # "tcp" | "udp"
    ports: tuple[int, int]
    cidr: str
    what: str


@dataclass(frozen=True)
class Decision:
    allowed: bool | None  # None: not decided by these rules (named in ``why``)
    why: str = ""


def network_acl(acl: dict[str, Any], flow: Flow, *, egress: bool) -> Decision:
    """The network ACL's answer to ``flow`` in one direction (IPv4 entries; ``flow.cidr`` is IPv4)."""
    acl_id = str(acl.get("NetworkAclId", "?"))
    far = ipaddress.IPv4Network(flow.cidr, strict=False)
    entries = sorted(
        (e for e in acl.get("Entries", []) if bool(e.get("Egress")) == egress and e.get("CidrBlock")),
        key=lambda e: int(e.get("RuleNumber", LAST_RULE)),
    )
    left = [flow.ports]  # the ports no entry has decided yet
    for entry in entries:
        protocol = str(entry.get("Protocol", ""))
        if protocol not in ("-1", _NUMBERS[flow.protocol]):
            continue
        span = entry.get("PortRange") if protocol != "-1" else None
        ports = (int(span.get("From", 0)), int(span.get("To", 65535))) if span else ALL_PORTS
        if not any(_overlap(part, ports) for part in left):
            continue
        rule_net = _net(entry["CidrBlock"])
        if rule_net is None or not rule_net.overlaps(far):
            continue
        number = int(entry.get("RuleNumber", LAST_RULE))
        rule = f"network ACL {acl_id} rule {'*' if number == LAST_RULE else number}"
        if not far.subnet_of(rule_net):
            return Decision(None, f"{rule} ({entry['CidrBlock']}) covers only part of {flow.what}")
        if entry.get("RuleAction") != "allow":
            return Decision(False, f"{rule} denies {flow.what}")
        left = [rest for part in left for rest in _minus(part, ports)]
        if not left:
            return Decision(True)
    # the final ``*`` entry (AWS lists it as rule 32767; moto does not list it)
    return Decision(False, f"network ACL {acl_id} rule * denies {flow.what}")


def security_groups(permissions: list[dict[str, Any]], flow: Flow, peers: tuple[str, ...] = ()) -> Decision:
    """Whether any of ``permissions`` (the egress or ingress rules of every group of an interface)
    allows ``flow``, whose far end is ``flow.cidr`` or an interface carrying a group in ``peers``."""
    far = ipaddress.IPv4Network(flow.cidr, strict=False)
    partial: list[str] = []
    for rule in permissions:
        protocol = str(rule.get("IpProtocol", ""))
        if protocol not in ("-1", flow.protocol, _NUMBERS[flow.protocol]):
            continue
        if protocol != "-1" and not (
            int(rule.get("FromPort", 0)) <= flow.ports[0] and flow.ports[1] <= int(rule.get("ToPort", 65535))
        ):
            continue
        for block in rule.get("IpRanges", []):
            rule_net = _net(block.get("CidrIp"))
            if rule_net is not None and far.subnet_of(rule_net):
                return Decision(True)
            if rule_net is not None and rule_net.overlaps(far):
                partial.append(str(block["CidrIp"]))
        if any(pair.get("GroupId") in peers for pair in rule.get("UserIdGroupPairs", [])):
            return Decision(True)
        partial += [f"prefix list {p.get('PrefixListId', '?')}" for p in rule.get("PrefixListIds", [])]
    if partial:
        return Decision(None, f"rules allow {flow.what} only to {', '.join(partial)}")
    return Decision(False, f"no rule allows {flow.what}")


def _net(text: Any) -> ipaddress.IPv4Network | None:
    """An IPv4 CIDR of a described rule; None for anything else (not judged by the caller's rule)."""
    try:
        return ipaddress.IPv4Network(str(text), strict=False)
    except ValueError:
        return None


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return max(a[0], b[0]) <= min(a[1], b[1])


def _minus(part: tuple[int, int], ports: tuple[int, int]) -> list[tuple[int, int]]:
    """``part`` without ``ports``: zero, one or two ranges."""
    out = []
    if part[0] < ports[0]:
        out.append((part[0], min(part[1], ports[0] - 1)))
    if part[1] > ports[1]:
        out.append((max(part[0], ports[1] + 1), part[1]))
    return out
