"""The project configuration file (``.imagelint.yaml``): packs, selection, severities, fail-on, the
owner's intent (expected units, files provided at launch), waivers.

Validated against its own schema (``imagelint schema config``); every reference in it (a rule in a
waiver, a severity override, an exact id in select/ignore) must name a loaded rule, else the file is
refused with file:line:column.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from dataclasses import field
from pathlib import Path
from typing import Any, NamedTuple

from imagelint.diff.policy import DiffPolicy, diff_schema_section
from imagelint.errors import ConfigError
from imagelint.records import dataclass
from imagelint.rulepacks.model import Rule, RulePack, Severity
from imagelint.usertext import shown
from imagelint.yamlsource import YamlDocument, first_schema_error, load_yaml

CONFIG_NAMES = (".imagelint.yaml", ".imagelint.yml")
DEFAULT_FAIL_ON = Severity.MEDIUM
_SELECTOR = {
    "type": "string",
    "minLength": 1,
    "description": "rule id, name, tag:TAG or pack:NAME; globs allowed",
}


def config_schema() -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://imagelint.dev/schemas/config-v1.json",
        "title": "imagelint configuration (.imagelint.yaml)",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "version": {"const": 1, "description": "the config format's version: 1"},
            "rules": {
                "type": "array",
                "items": {"type": "string"},
                "description": "extra rule packs (files or directories), relative to this file",
            },
            "builtin-rules": {"type": "boolean", "default": True, "description": "load the built-in packs"},
            "select": {"type": "array", "items": _SELECTOR, "description": "run only these rules"},
            "ignore": {"type": "array", "items": _SELECTOR, "description": "never run these rules"},
            "severity": {
                "type": "object",
                "additionalProperties": {"enum": [s.value for s in Severity]},
                "description": "severity overrides by rule id or name",
            },
            "parameters": {
                "type": "object",
                "additionalProperties": {"type": "object"},
                "description": "check parameters to override, by rule id or name (e.g. thresholds)",
            },
            "require-journal": {
                "type": "boolean",
                "default": False,
                "description": "no journal in the image is inconclusive (audits of booted instances)",
            },
            "fail-on": {
                "enum": [s.value for s in Severity],
                "default": DEFAULT_FAIL_ON.value,
                "description": "the lowest severity that fails the run (exit 1)",
            },
            "expected-units": {
                "type": "array",
                "items": {"type": "string", "pattern": r"^[^/\s]+\.[a-z]+$"},
                "description": "units this image is meant to run at boot",
            },
            "provided-at-launch": {
                "type": "array",
                "items": {"type": "string", "pattern": "^/", "minLength": 2},
                "description": (
                    "absolute paths or globs of files that arrive at launch (user data, cloud-init, an "
                    "instance bootstrap): an expected unit whose missing vendor configuration is one of "
                    "them is not expected to fail for it"
                ),
            },
            "waivers": {
                "type": "array",
                "items": {"$ref": "#/$defs/waiver"},
                "description": "findings accepted for a reason, until an expiry date",
            },
            "diff": diff_schema_section(),
        },
        "$defs": {
            "waiver": {
                "type": "object",
                "additionalProperties": False,
                "required": ["rule", "reason"],
                "properties": {
                    "rule": {"type": "string", "description": "rule id or name"},
                    "path": {"type": "string", "description": "glob of the finding's image path"},
                    "unit": {"type": "string", "description": "glob of the finding's unit"},
                    "reason": {"type": "string", "minLength": 3, "description": "why it is accepted"},
                    "owner": {"type": "string", "description": "who answers for the waiver"},
                    "expires": {
                        "type": "string",
                        "format": "date",
                        "pattern": r"^\d{4}-\d{2}-\d{2}$",
                        "description": (
                            "YYYY-MM-DD: the waiver holds through that day (UTC); after it, it waives "
                            "nothing and IL001 fails the run"
                        ),
                    },
                },
            }
        },
    }


class Waiver(NamedTuple):
    rule: str
    reason: str
    source: str  # file:line
    path: str | None = None
    unit: str | None = None
    owner: str | None = None
    expires: dt.date | None = None

    def expired(self, today: dt.date) -> bool:
        """A waiver holds through the whole of its expiry date."""
        return self.expires is not None and today > self.expires

    def covers(self, rule: Rule, path: str | None, unit: str | None) -> bool:
        if not rule.matches(self.rule):
            return False
        if self.path is not None and (path is None or not fnmatch.fnmatchcase(path, self.path)):
            return False
        return self.unit is None or (unit is not None and fnmatch.fnmatchcase(unit, self.unit))

    def to_dict(self) -> dict[str, Any]:
        data = {"rule": self.rule, "reason": self.reason, "owner": self.owner, "source": self.source}
        data.update({"path": self.path, "unit": self.unit})
        data["expires"] = self.expires.isoformat() if self.expires else None
        return data


@dataclass(frozen=True)
class Config:
    path: str | None = None
    sha256: str | None = None
    rule_packs: list[Path] = field(default_factory=list)
    builtin_rules: bool = True
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, Severity] = field(default_factory=dict)
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    require_journal: bool = False
    fail_on: Severity = DEFAULT_FAIL_ON
    expected_units: list[str] = field(default_factory=list)
    provided_at_launch: list[str] = field(default_factory=list)
    waivers: list[Waiver] = field(default_factory=list)
    diff: DiffPolicy = field(default_factory=DiffPolicy)  # imagelint diff: what fails, what warns
    document: YamlDocument | None = None

    def check_references(self, rules: list[Rule]) -> None:
        """Refuse references to rules that are not loaded (a typo must not silently waive nothing)."""

        def known(selector: str) -> bool:
            return any(r.matches(selector) for r in rules)

        for key, selectors in (("select", self.select), ("ignore", self.ignore)):
            for i, sel in enumerate(selectors):
                if not known(sel):
                    raise ConfigError(
                        f"{key} names {shown(sel)}, which matches no loaded rule", where=self._at([key, i])
                    )
        for name in self.severity:
            if not any(r.id == name or r.name == name for r in rules):
                raise ConfigError(
                    f"severity override for unknown rule {shown(name)}", where=self._at(["severity", name])
                )
        for name in self.parameters:
            if not any(r.id == name or r.name == name for r in rules):
                where = self._at(["parameters", name])
                raise ConfigError(f"parameters for unknown rule {shown(name)}", where=where)
        for i, waiver in enumerate(self.waivers):
            if not any(r.id == waiver.rule or r.name == waiver.rule for r in rules):
                raise ConfigError(
                    f"waiver for unknown rule {shown(waiver.rule)}", where=self._at(["waivers", i, "rule"])
                )

    def apply_parameters(self, packs: list[RulePack]) -> None:
        """Merge ``parameters:`` overrides into the rules' checks, validated like a rule pack's."""
        from imagelint.rulepacks.loader import override_params

        for pack in packs:
            for i, rule in enumerate(pack.rules):
                override = self.parameters.get(rule.id) or self.parameters.get(rule.name)
                if override:
                    key = rule.id if rule.id in self.parameters else rule.name
                    pack.rules[i] = override_params(rule, override, self._at(["parameters", key]))

    def _at(self, json_path: list[str | int]) -> str:
        return self.document.locate(json_path) if self.document else (self.path or "config")


def _pack_problem(pack: Path) -> str | None:
    """Why a ``rules:`` entry cannot be loaded as rule packs, said at the config's line; else None."""
    try:
        if pack.is_dir():
            if not any(pack.glob("*.yaml")) and not any(pack.glob("*.yml")):
                return "is a directory without *.yaml rule packs"
            return None
        if not pack.exists():
            return "does not exist"
        if not pack.is_file():
            return "is neither a file nor a directory"
    except (OSError, ValueError):  # a name too long, a NUL byte in it...
        return "cannot be opened"
    return None


def _sha256(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}", where=str(path)) from None


def find_config(explicit: Path | None, cwd: Path) -> Path | None:
    if explicit is not None:
        return explicit
    for name in CONFIG_NAMES:
        if (cwd / name).is_file():
            return cwd / name
    return None


def load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    document = load_yaml(path, error=ConfigError)
    data = document.data if document.data is not None else {}
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a mapping", where=document.locate([]))
    first_schema_error(document, config_schema(), ConfigError)
    base = path.parent
    waivers = []
    for i, raw in enumerate(data.get("waivers", [])):
        expires = None
        if "expires" in raw:
            try:
                expires = dt.date.fromisoformat(raw["expires"])
            except ValueError:
                where = document.locate(["waivers", i, "expires"])
                raise ConfigError(f"not a date: {shown(raw['expires'])}", where=where) from None
        waivers.append(
            Waiver(
                rule=raw["rule"],
                reason=raw["reason"],
                source=document.locate(["waivers", i]),
                path=raw.get("path"),
                unit=raw.get("unit"),
                owner=raw.get("owner"),
                expires=expires,
            )
        )
    packs = []
    for i, entry in enumerate(data.get("rules", [])):
        pack = base / entry
        problem = _pack_problem(pack)
        if problem:
            raise ConfigError(f"rules: {shown(entry)} {problem}", where=document.locate(["rules", i]))
        packs.append(pack)
    return Config(
        path=str(path),
        sha256=_sha256(path),
        rule_packs=packs,
        builtin_rules=data.get("builtin-rules", True),
        select=list(data.get("select", [])),
        ignore=list(data.get("ignore", [])),
        severity={k: Severity(v) for k, v in data.get("severity", {}).items()},
        parameters=dict(data.get("parameters", {})),
        require_journal=bool(data.get("require-journal", False)),
        fail_on=Severity(data.get("fail-on", DEFAULT_FAIL_ON.value)),
        expected_units=list(data.get("expected-units", [])),
        provided_at_launch=list(data.get("provided-at-launch", [])),
        waivers=waivers,
        diff=DiffPolicy.from_config(data.get("diff")),
        document=document,
    )
