"""The contract between the engine and a check kind, and the registry of kinds.

A check kind is Python code that looks at a target and returns *observations*: one per thing it
found (a path, a unit). A rule (data, in YAML) picks a kind, gives it parameters, and turns each
observation into a finding with its own severity and message. Kinds never decide pass or fail.

The modules that define kinds are listed in ``KIND_MODULES`` (the plumbing in ``HELPERS``); they are
imported on first use of :func:`registry`, and their ``@register`` classes become available to rule
packs. A new subject is one module in the package, a line in that list, and its test.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import field
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from imagelint.checks.params import ParamError, ParamType, build, properties, required
from imagelint.records import dataclass
from imagelint.targets.interface import Target


@dataclass
class Observation:
    """One thing a check found. ``evidence`` is shown in reports and feeds the message template."""

    subject: str  # what the finding is about (a path, a unit): waivers and fingerprints key on it
    path: str | None = None  # where in the image, when there is a file
    line: int | None = None
    unit: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def variables(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "path": self.path,
            "line": self.line,
            "unit": self.unit,
            **self.evidence,
        }


class PathNeed(NamedTuple):
    """An image path or glob a check kind reads, declared so that a remote collector gathers it.

    ``how``: ``content`` (the matches with their content), ``metadata`` (lstat only), ``tree`` (the
    matches and everything below them, metadata), ``tree-content`` (the same with content),
    ``journal`` (a tree of journal files, with the journal size cap), ``sshd`` (the file and what its
    ``Include`` lines name), ``unit-references`` (every absolute path the collected unit files name).
    """

    glob: str
    how: str = "content"


class NotApplicable(Exception):
    """Raised by a check whose subject is absent from the target (no sshd installed, no journal kept)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


T = TypeVar("T")
P = TypeVar("P")


@dataclass(frozen=True)
class CheckSettings:
    """The run's settings a check may read (from the config and the command line); immutable."""

    expected_units: tuple[str, ...] = ()
    provided_at_launch: tuple[str, ...] = ()  # globs of files that arrive at launch (user data...)
    waivers: tuple[Any, ...] = ()  # config.Waiver objects, for the check on the waivers themselves
    today: dt.date = field(default_factory=lambda: dt.datetime.now(dt.UTC).date())


class FactProvider:
    """Where checks get their data: the target, the data sources a command supplied, and facts built
    once per run and shared between rules.

    A *source* is any object a command hands in (the soak's measurements, the live unit state, where
    to read the journal): a check asks for it by type with :meth:`source` and gets None when this run
    has none. Adding a source is one new class and the command that makes it; neither this class nor
    the engine changes.
    """

    def __init__(self, target: Target, sources: Iterable[object] = ()) -> None:
        self.target = target
        self._sources: dict[type, object] = {}
        for source in sources:
            if type(source) in self._sources:
                raise ValueError(f"two data sources of type {type(source).__name__}")
            self._sources[type(source)] = source
        self._cache: dict[object, Any] = {}

    def source(self, kind: type[T]) -> T | None:
        found = self._sources.get(kind)
        return found if isinstance(found, kind) else None

    def get(self, key: object, build: Callable[[], T]) -> T:
        """Build a fact once per run (parsed sshd config, unit index...) and share it between rules."""
        if key not in self._cache:
            self._cache[key] = build()
        value: T = self._cache[key]
        return value


@dataclass
class RunLog:
    """What the run says beside its findings: notes, warnings and the sources' own accounts."""

    recorded: dict[str, Callable[[], Any]] = field(default_factory=dict)  # rendered into report.facts
    notes: list[str] = field(default_factory=list)  # one-line accounts for people (files read...)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (where, message)


@dataclass
class CheckContext:
    """What one rule's check sees: immutable settings, the run's fact provider, and a collector of
    its own (the engine makes a fresh context for every rule, so one rule's gaps are not another's).
    """

    settings: CheckSettings
    facts: FactProvider
    log: RunLog = field(default_factory=RunLog)
    gaps: list[tuple[str, str]] = field(default_factory=list)  # (where, what): data present but unread
    explanations: list[str] = field(default_factory=list)  # how the config changed what it found

    @classmethod
    def for_target(cls, target: Target, *sources: object, **settings: Any) -> CheckContext:
        """A context on its own (tests, one-off evaluations): a fresh fact provider and run log."""
        return cls(CheckSettings(**settings), FactProvider(target, sources))

    @property
    def target(self) -> Target:
        return self.facts.target

    def source(self, kind: type[T]) -> T | None:
        return self.facts.source(kind)

    def fact(self, key: object, build: Callable[[], T]) -> T:
        return self.facts.get(key, build)

    def warn(self, where: str, message: str) -> None:
        if (where, message) not in self.log.warnings:
            self.log.warnings.append((where, message))

    def note(self, text: str) -> None:
        self.log.notes.append(text)

    def warn_undecodable(self, path: str, offset: int) -> None:
        self.warn(path, f"not valid UTF-8 at byte {offset}; undecodable bytes were escaped")

    def read_text(self, path: str) -> str:
        """A text file of the target; non-UTF-8 content is kept (escaped) and warned about."""
        content = self.target.read_text(path)
        if content.invalid_utf8_at is not None:
            self.warn_undecodable(path, content.invalid_utf8_at)
        return content.text

    def record(self, name: str, to_dict: Callable[[], Any]) -> None:
        """Put a source's own account (files read, skipped...) in the report, rendered at the end."""
        self.log.recorded[name] = to_dict

    def explain(self, text: str) -> None:
        """Say why the config changed what the rule found (the owner's intent answered a piece of
        evidence): the engine puts it in the rule's result and the report's notes."""
        if text not in self.explanations:
            self.explanations.append(text)

    def gap(self, where: str, message: str) -> None:
        """Data is there but could not be read (fully): the rule's run cannot pass on it."""
        if (where, message) not in self.gaps:
            self.gaps.append((where, message))


class CheckKind(ABC, Generic[P]):
    """One kind of check. Subclasses set the class attributes and implement ``evaluate``; ``P`` is the
    frozen dataclass of its parameters (:mod:`imagelint.checks.params`), which ``parameters`` names."""

    name: ClassVar[str]  # e.g. "file.present"
    summary: ClassVar[str]  # one line for docs and `imagelint rules show`
    parameters: type[P]  # its parameters: the schema is generated from it, rules get an instance
    variables: ClassVar[dict[str, str]] = {}  # template variables each observation provides, with meaning

    def arguments(self, params: Mapping[str, Any]) -> P:
        """The typed parameters of a rule, from the dict its schema accepted (built once, on loading)."""
        return build(self.parameters, params)

    def paths(self, params: P) -> list[PathNeed]:
        """The image paths this check reads with these parameters (for the remote collector)."""
        return []

    def validate(self, params: P) -> None:
        """Semantic checks beyond the schema (compile regexes...). Raise ParamError."""

    def kernel_lines_only(self, params: P) -> bool:
        """Whether the check reads nothing but the journal's kernel lines, so that a machine's serial
        console (:mod:`imagelint.facts.journal.console`) is judged by it as a journal is."""
        return False

    @abstractmethod
    def evaluate(self, ctx: CheckContext, params: P) -> list[Observation]:
        """Observations found on the target. Raise NotApplicable when the subject is absent.

        ImageReadError (from the target) propagates: the engine turns it into an error result.
        """

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"kind": {"const": self.name}, **properties(self.parameters)},
            "required": ["kind", *required(self.parameters)],
        }


K = TypeVar("K", bound=CheckKind[Any])
_REGISTRY: dict[str, CheckKind[Any]] = {}
# The modules of this package that define check kinds: the one list of them (a new subject is its
# module, a line here and its test); tests/test_registries.py fails on a module of the package that is
# neither listed here nor one of HELPERS.
KIND_MODULES = ("cgroups", "cpu", "files", "journal", "sshd", "systemd", "systemd_live", "waivers")
HELPERS = frozenset({"base", "params"})  # modules of this package that define no kind
_discovered = False


def register(cls: type[K]) -> type[K]:
    """Class decorator: make a check kind available to rule packs under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise RuntimeError(f"check kind {cls.name} registered twice")
    _REGISTRY[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove a kind registered by name (for kinds a test or plug-in registered for a while)."""
    _REGISTRY.pop(name, None)


def registry() -> dict[str, CheckKind[Any]]:
    """All check kinds, by name (importing the modules that define them on first use)."""
    global _discovered
    if not _discovered:
        for name in KIND_MODULES:
            importlib.import_module(f"{__package__}.{name}")
        _discovered = True
    return _REGISTRY


_VALIDATED: ContextVar[bool] = ContextVar("imagelint_validated", default=False)


@contextlib.contextmanager
def validated_already() -> Iterator[None]:
    """Build parameters that an earlier load of the same pack validated against their schemas (a
    kept pack, authenticated by :mod:`imagelint.rulepacks.cache`): nested check specs are not
    validated again."""
    token = _VALIDATED.set(True)
    try:
        yield
    finally:
        _VALIDATED.reset(token)


@dataclass(frozen=True)
class CheckCall(ParamType):
    """A check spec inside a kind's parameters (``{kind: file.contains, paths: [...], ...}``): the
    kind's name and its typed parameters, checked against that kind's own schema when built."""

    kind: str
    arguments: Any

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}}}

    @classmethod
    def from_value(cls, value: Any) -> CheckCall:
        kind = registry().get(value["kind"])
        if kind is None:
            raise ParamError([], f"unknown check kind {value['kind']!r}")
        if not _VALIDATED.get():
            import jsonschema  # only here and on loading: a pack kept by rulepacks.cache needs neither

            schema = {**kind.schema(), "additionalProperties": False}
            validator = jsonschema.Draft202012Validator(schema)
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                raise ParamError(list(error.absolute_path), error.message)
        params = {k: v for k, v in value.items() if k != "kind"}
        return cls(kind.name, kind.arguments(params))
