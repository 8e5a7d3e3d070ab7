"""The changes between two sides (inventories and findings), before any policy is applied.

Units are compared by name. A unit only NEW has is one change (a new boot unit, with its chain, or
a new unit file), not also a list of its settings; the same for one only OLD has. For a unit both
have: started at boot or no longer, enablement state, preset, restart policy, executables that
appeared or vanished (added to the unit, or now present/missing in the image), drop-ins added,
changed (content hash) or removed. Then the default target, packages, os-release and kernel
command line, and findings by fingerprint (waived findings are left out on both sides).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from imagelint.records import dataclass
from imagelint.report.fingerprint import fingerprint
from imagelint.report.model import Finding
from imagelint.report.verdict import fails_on_its_own

ARROW = " → "


@dataclass
class Change:
    kind: str  # a key of imagelint.diff.policy.KINDS
    subject: str  # the unit, package, file or finding the change is about
    change: str  # added, removed or changed
    detail: str  # one line for people
    unit: str | None = None
    chain: list[str] | None = None  # new-boot-units: how NEW starts it; removed-boot-units: how OLD did
    old: Any = None
    new: Any = None
    failing: bool = True  # new-findings: whether the finding fails NEW's own gate
    action: str = "warn"  # set by the policy (imagelint.diff.verdict.change_action)
    device: str | None = None  # a diff of two AMIs: the volume's device name

    def to_dict(self) -> dict[str, Any]:
        device = {} if self.device is None else {"device": self.device}
        return {
            **device,
            "kind": self.kind,
            "action": self.action,
            "subject": self.subject,
            "change": self.change,
            "detail": self.detail,
            "unit": self.unit,
            "chain": self.chain,
            "old": self.old,
            "new": self.new,
        }


@dataclass
class Side:
    """One side of a diff: where it came from, its inventory and its findings."""

    description: str
    source: str  # "image" (audited now), "report" (a JSON report file) or "cache" (imagelint.diff.cache)
    inventory: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    verdict: str = "pass"  # its own audit's verdict
    sha256: str | None = None  # of the report file
    blocks: dict[str, Any] | None = None  # an EBS snapshot's: blocks fetched and reused (schema.py)

    @property
    def complete(self) -> bool:
        return bool(self.inventory.get("complete")) and self.verdict != "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "source": self.source,
            "sha256": self.sha256,
            "complete": self.complete,
            "verdict": self.verdict,
            "units": len(self.inventory.get("units", {})),
            "packages": self.inventory.get("packages", {}).get("count", 0),
            "blocks": self.blocks,
        }


def compare(old: Side, new: Side) -> list[Change]:
    changes = _units(old.inventory.get("units", {}), new.inventory.get("units", {}))
    if old.inventory.get("default_target") != new.inventory.get("default_target"):
        a, b = old.inventory.get("default_target"), new.inventory.get("default_target")
        changes.append(Change("default-target", "default.target", "changed", f"{a} → {b}", old=a, new=b))
    changes += _packages(old.inventory.get("packages", {}), new.inventory.get("packages", {}))
    changes += _image(old.inventory, new.inventory)
    changes += _findings(old.findings, new.findings)
    return changes


def _chain(chain: list[str] | None) -> str:
    return ARROW.join(chain) if chain else "not started at boot"


def _seconds(value: float | None) -> str:
    return "infinity" if value is None else f"{value:g}s"


def _restart_text(restart: dict[str, Any] | None) -> str:
    if not restart:
        return "Restart=no"
    text = (
        f"Restart={restart['restart']} RestartSec={_seconds(restart['restart_sec'])} "
        f"StartLimitBurst={restart['start_limit_burst']} "
        f"StartLimitIntervalSec={_seconds(restart['start_limit_interval_sec'])}"
    )
    return text + ("" if restart["limit_can_trip"] else " (the start limit can never trip)")


RESTART_FIELDS = (
    ("restart", "Restart="),
    ("restart_sec", "RestartSec="),
    ("start_limit_burst", "StartLimitBurst="),
    ("start_limit_interval_sec", "StartLimitIntervalSec="),
)


def _restart_change(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str:
    """The settings that changed, then what it means for the start limit."""
    if not old or not new:
        return f"{_restart_text(old)} → {_restart_text(new)}"
    shown = {"restart_sec": _seconds, "start_limit_interval_sec": _seconds}
    parts = [
        f"{label}{shown.get(key, str)(old[key])} → {shown.get(key, str)(new[key])}"
        for key, label in RESTART_FIELDS
        if old[key] != new[key]
    ]
    if old["limit_can_trip"] and not new["limit_can_trip"] and new["restart"] != "no":
        parts.append(f"the start limit can no longer trip: {new['why']}")
    elif not old["limit_can_trip"] and new["limit_can_trip"] and old["restart"] != "no":
        parts.append("the start limit can trip again")
    return "; ".join(parts) or "changed"


def _summary(entry: dict[str, Any]) -> str:
    parts = [f"state {entry['state']}", f"preset {entry['preset']}"]
    restart = entry.get("restart")
    if restart and restart["restart"] != "no":
        parts.append(_restart_text(restart))
    missing = [e["path"] for e in entry.get("execs", []) if e["exists"] is False]
    if missing:
        parts.append("missing: " + ", ".join(missing))
    return ", ".join(parts)


def _units(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes: list[Change] = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a is None and b is not None:
            kind = "new-boot-units" if b["boot_chain"] else "unit-files"
            where = f"started at boot: {_chain(b['boot_chain'])}" if b["boot_chain"] else "new unit file"
            changes.append(
                Change(kind, name, "added", f"{where} ({_summary(b)})", name, b["boot_chain"], None, b)
            )
        elif b is None and a is not None:
            kind = "removed-boot-units" if a["boot_chain"] else "unit-files"
            where = f"no longer started at boot (was {_chain(a['boot_chain'])})" if a["boot_chain"] else ""
            changes.append(
                Change(kind, name, "removed", where or "unit file removed", name, a["boot_chain"], a, None)
            )
        elif a is not None and b is not None:
            changes += _unit(name, a, b)
    return changes


def _unit(name: str, a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    out: list[Change] = []
    if a["boot_chain"] is None and b["boot_chain"] is not None:
        detail = f"now started at boot: {_chain(b['boot_chain'])} ({_summary(b)})"
        out.append(
            Change("new-boot-units", name, "changed", detail, name, b["boot_chain"], None, b["boot_chain"])
        )
    elif a["boot_chain"] is not None and b["boot_chain"] is None:
        detail = f"no longer started at boot (was {_chain(a['boot_chain'])})"
        out.append(
            Change(
                "removed-boot-units", name, "changed", detail, name, a["boot_chain"], a["boot_chain"], None
            )
        )
    if a["state"] != b["state"]:
        out.append(
            Change(
                "enablement",
                name,
                "changed",
                f"{a['state']} → {b['state']}",
                name,
                None,
                a["state"],
                b["state"],
            )
        )
    if a["preset"] != b["preset"]:
        out.append(
            Change(
                "preset",
                name,
                "changed",
                f"{a['preset']} → {b['preset']}",
                name,
                None,
                a["preset"],
                b["preset"],
            )
        )
    if a.get("restart") != b.get("restart"):
        detail = _restart_change(a.get("restart"), b.get("restart"))
        out.append(
            Change("restart-policy", name, "changed", detail, name, None, a.get("restart"), b.get("restart"))
        )
    out += _execs(name, a.get("execs", []), b.get("execs", []))
    out += _dropins(name, a.get("dropins", []), b.get("dropins", []))
    return out


def _execs(name: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Change]:
    a = {e["path"]: e["exists"] for e in old}
    b = {e["path"]: e["exists"] for e in new}
    appeared = sorted(p for p in b if b[p] is not False and (p not in a or a[p] is False))
    vanished = sorted(p for p in a if a[p] is not False and (p not in b or b[p] is False))
    out = []
    for path in appeared:
        how = "now present in the image" if path in a else "added to the unit"
        out.append(Change("executables", name, "added", f"{path}: {how}", name, None, a.get(path), b[path]))
    for path in vanished:
        how = "now missing from the image" if path in b else "no longer run by the unit"
        out.append(Change("executables", name, "removed", f"{path}: {how}", name, None, a[path], b.get(path)))
    return out


def _dropins(name: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Change]:
    a = {d["path"]: d["sha256"] for d in old}
    b = {d["path"]: d["sha256"] for d in new}
    out = []
    for path in sorted(set(a) | set(b)):
        if path not in a:
            out.append(Change("dropins", name, "added", f"drop-in {path} added", name, None, None, b[path]))
        elif path not in b:
            out.append(
                Change("dropins", name, "removed", f"drop-in {path} removed", name, None, a[path], None)
            )
        elif a[path] != b[path]:
            out.append(
                Change("dropins", name, "changed", f"drop-in {path} changed", name, None, a[path], b[path])
            )
    return out


def _packages(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Package changes; none when either database was not read in full (the diff is inconclusive
    then: half a database would show every unread package as removed)."""
    if not old.get("complete", True) or not new.get("complete", True):
        return []
    a, b = old.get("items", {}), new.get("items", {})
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in a:
            out.append(Change("packages", name, "added", f"added {b[name]}", old=None, new=b[name]))
        elif name not in b:
            out.append(Change("packages", name, "removed", f"removed (was {a[name]})", old=a[name], new=None))
        elif a[name] != b[name]:
            out.append(
                Change("packages", name, "changed", f"{a[name]} → {b[name]}", old=a[name], new=b[name])
            )
    return out


def _image(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    out = []
    a, b = old.get("os_release") or {}, new.get("os_release") or {}
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            detail = f"{a.get(key)} → {b.get(key)}"
            out.append(
                Change("image", f"os-release {key}", "changed", detail, old=a.get(key), new=b.get(key))
            )
    ca = {c["source"]: c["value"] for c in old.get("kernel_cmdline", [])}
    cb = {c["source"]: c["value"] for c in new.get("kernel_cmdline", [])}
    for source in sorted(set(ca) | set(cb)):
        if ca.get(source) != cb.get(source):
            detail = f"kernel command line: {ca.get(source)!r} → {cb.get(source)!r}"
            out.append(Change("image", source, "changed", detail, old=ca.get(source), new=cb.get(source)))
    return out


def _findings(old: list[Finding], new: list[Finding]) -> list[Change]:
    a = {fingerprint(f): f for f in old if f.waiver is None}
    b = {fingerprint(f): f for f in new if f.waiver is None}
    out = []
    for key, f in sorted(b.items(), key=lambda kv: (kv[1].rule_id, kv[1].subject)):
        if key not in a:
            detail = f"{f.rule_id} {f.severity.value}: {f.message}"
            out.append(
                Change(
                    "new-findings",
                    f"{f.rule_id} {f.subject}",
                    "added",
                    detail,
                    f.unit,
                    new=key,
                    failing=fails_on_its_own(f),
                )
            )
    for key, f in sorted(a.items(), key=lambda kv: (kv[1].rule_id, kv[1].subject)):
        if key not in b:
            detail = f"{f.rule_id} {f.severity.value}: {f.message}"
            out.append(
                Change("resolved-findings", f"{f.rule_id} {f.subject}", "removed", detail, f.unit, old=key)
            )
    return out
