"""The in-memory form of rules and rule packs."""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum
from typing import Any

from imagelint.records import dataclass
from imagelint.rulepacks.fixes import FixAction


class Severity(StrEnum):
    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


class RuleStatus(StrEnum):
    """Where a rule is in its life. Ids are forever: a rule is retired as ``removed``, never deleted."""

    STABLE = "stable"
    PREVIEW = "preview"  # runs only when selected by its id or name
    DEPRECATED = "deprecated"  # runs, and the report says what to use instead
    REMOVED = "removed"  # never runs; kept so that the id is not reused and old selectors redirect


class Scope(StrEnum):
    IMAGE = "image"  # offline, from the files of a mounted image
    HOST = "host"  # a running host: live probes
    SOAK = "soak"  # a running host observed over minutes


@dataclass(frozen=True)
class CheckSpec:
    """A check kind with its parameters, and the conditions that gate it."""

    kind: str
    params: dict[str, Any]  # as the rule pack writes them (shown in docs and reasons; overridden by config)
    arguments: object  # the same, as an instance of the kind's parameters dataclass (built on loading)
    when: tuple[CheckSpec, ...] = ()  # all must hold, else the rule is not applicable
    unless: tuple[CheckSpec, ...] = ()  # if any holds, the rule passes without running


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    title: str
    severity: Severity
    scopes: tuple[Scope, ...]
    check: CheckSpec
    message: str
    remediation: str
    description: str = ""
    references: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    pack: str = ""
    source: str = ""  # file:line of the rule's definition
    example: dict[str, Any] | None = None  # a tree that makes it fire, for the docs
    negative_example: dict[str, Any] | None = None  # a tree near it where it must stay quiet
    status: RuleStatus = RuleStatus.STABLE
    since: str = ""  # the version that first had it
    renamed_from: tuple[str, ...] = ()  # earlier names, still matched by selectors and waivers
    replaces: tuple[str, ...] = ()  # ids of removed rules it takes over
    replaced_by: str = ""  # for a deprecated or removed rule: what to use instead
    subsumes: tuple[str, ...] = ()  # rules whose findings on its unit fold into its failing finding
    fix: tuple[FixAction, ...] = ()  # machine-applicable remediation (imagelint fix)

    def matches(self, selector: str) -> bool:
        """True when a select/ignore/waiver entry names this rule (id, name, tag:X, pack:X; globs allowed)."""
        from fnmatch import fnmatchcase

        if selector.startswith("tag:"):
            return any(fnmatchcase(t, selector[4:]) for t in self.tags)
        if selector.startswith("pack:"):
            return fnmatchcase(self.pack, selector[5:])
        names = (self.id, self.name, *self.renamed_from, *self.replaces)
        return any(fnmatchcase(n, selector) for n in names)

    def named_by(self, selector: str) -> bool:
        """True when ``selector`` names this rule itself (id or name, no glob, tag or pack)."""
        return selector in (self.id, self.name, *self.renamed_from, *self.replaces)


@dataclass
class RulePack:
    name: str
    path: str
    sha256: str
    description: str
    rules: list[Rule] = field(default_factory=list)
    builtin: bool = False
