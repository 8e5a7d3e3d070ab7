"""Read rule packs from YAML, validate them, and turn them into Rule objects.

Every refusal names file:line:column: YAML syntax, schema violations (unknown key, wrong type,
unknown check kind), parameters a kind rejects (a regex that does not compile), message templates
that use a variable the kind does not provide, and duplicate rule ids across all loaded packs.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from imagelint.checks import ParamError, registry
from imagelint.checks.base import validated_already
from imagelint.errors import ConfigError, RulePackError
from imagelint.rulepacks import cache
from imagelint.rulepacks.fixes import FixAction, with_defaults
from imagelint.rulepacks.model import CheckSpec, Rule, RulePack, RuleStatus, Scope, Severity
from imagelint.rulepacks.schema import rules_schema
from imagelint.usertext import one_line, shown
from imagelint.yamlsource import YamlDocument, first_schema_error, parse_yaml, read_yaml_bytes

COMMON_VARIABLES = {"id", "name", "subject", "path", "line", "unit"}
_FIX_FIELD = re.compile(r"\{(?:path|unit)\}")  # what a fix argument may name of its finding
_SAFE_SPEC = re.compile(r"(?:.?[<>^])?[0-9]{0,3}")  # fill and alignment, width: nothing type-specific


def builtin_rules_dir() -> Path:
    """Where the built-in packs are: inside the installed wheel, else the source checkout's rules/."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_builtin_rules"
    return packaged if packaged.is_dir() else here.parent / "rules"


def builtin_pack_paths() -> list[Path]:
    return sorted(builtin_rules_dir().glob("*.yaml"))


def load_packs(paths: Iterable[Path], *, builtin: Iterable[Path] = ()) -> list[RulePack]:
    """Load packs in order; a rule id or name defined twice across them is an error."""
    packs: list[RulePack] = []
    seen: dict[str, str] = {}
    for path, is_builtin in [*((p, True) for p in builtin), *((p, False) for p in paths)]:
        for pack_path in _expand(Path(path)):
            pack = load_pack(pack_path, builtin=is_builtin)
            for rule in pack.rules:
                for key in (rule.id, rule.name):
                    if key in seen:
                        raise RulePackError(
                            f"rule {key} is already defined at {seen[key]}", where=rule.source
                        )
                    seen[key] = rule.source
            packs.append(pack)
    return packs


def _expand(path: Path) -> list[Path]:
    try:
        if path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                raise RulePackError("directory holds no *.yaml rule packs", where=str(path))
            return found
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte in it...
        raise RulePackError(f"cannot be opened: {one_line(str(exc))}", where=one_line(str(path))) from None
    return [path]


def load_pack(path: Path, *, builtin: bool = False) -> RulePack:
    """One pack: parsed, validated against the schema and built rule by rule (then kept for the next
    run), or built from the validated rules an earlier run kept for the same bytes
    (:mod:`imagelint.rulepacks.cache`: data only, authenticated)."""
    pack_bytes = read_yaml_bytes(path, error=RulePackError)
    kept = cache.recall(path, pack_bytes, builtin=builtin)
    if kept is not None:
        try:
            with validated_already():  # the kept rules passed the schema when they were kept
                rules = [(r["raw"], _kept_source(r["source"])) for r in kept["rules"]]
                return _built(path, builtin, kept["pack"], rules)
        except Exception:  # a kept entry is a hint: whatever it holds that does not build, read the YAML
            pass
    document = parse_yaml(str(path), pack_bytes, error=RulePackError)
    if document.data is None:
        raise RulePackError("is empty; a rule pack needs a 'rules:' list", where=document.locate([]))
    first_schema_error(document, rules_schema(), RulePackError)
    data = document.data
    meta = data.get("pack", {})
    header = {
        "name": meta.get("name", path.stem),
        "sha256": hashlib.sha256(pack_bytes).hexdigest(),
        "description": meta.get("description", ""),
    }
    located = [(raw, _located(document, ["rules", i])) for i, raw in enumerate(data["rules"])]
    pack = _built(path, builtin, header, located)
    # only once every rule in it has been built without error
    kept_rules = [
        {"raw": raw, "source": rule.source} for (raw, _), rule in zip(located, pack.rules, strict=True)
    ]
    cache.keep(path, pack_bytes, builtin=builtin, pack=header, rules=kept_rules)
    return pack


Locate = Callable[[list[str | int]], str]  # a place in a rule (a path of keys) -> file:line:column


def _located(document: YamlDocument, at: list[str | int]) -> Locate:
    return lambda inner: document.locate([*at, *inner])


def _kept_source(source: str) -> Locate:
    """A kept rule names its own source wherever it is asked (its parts were validated already)."""
    if not isinstance(source, str):
        raise TypeError(source)
    return lambda inner: source


def _built(
    path: Path, builtin: bool, header: dict[str, Any], rules: list[tuple[dict[str, Any], Locate]]
) -> RulePack:
    pack = RulePack(
        name=header["name"],
        path=str(path),
        sha256=header["sha256"],
        description=header["description"],
        builtin=builtin,
    )
    pack.rules.extend(_rule(raw, locate, pack.name) for raw, locate in rules)
    return pack


def _rule(raw: dict[str, Any], locate: Locate, pack: str) -> Rule:
    check = _check(locate, ["check"], raw["check"])
    kind = registry()[check.kind]
    _check_template(locate(["message"]), raw["message"], COMMON_VARIABLES | set(kind.variables))
    if raw["id"] in raw.get("subsumes", ()):
        where = locate(["subsumes", raw["subsumes"].index(raw["id"])])
        raise RulePackError(f"rule {raw['id']} subsumes itself", where=where)
    return Rule(
        id=raw["id"],
        name=raw["name"],
        title=raw["title"],
        severity=Severity(raw["severity"]),
        scopes=tuple(Scope(s) for s in raw["scope"]),
        check=check,
        message=raw["message"],
        remediation=raw["remediation"],
        description=raw.get("description", ""),
        references=tuple(raw.get("references", ())),
        tags=tuple(raw.get("tags", ())),
        pack=pack,
        source=locate([]),
        example=raw.get("example"),
        negative_example=raw.get("negative_example"),
        status=RuleStatus(raw.get("status", "stable")),
        since=raw.get("since", ""),
        renamed_from=tuple(raw.get("renamed_from", ())),
        replaces=tuple(raw.get("replaces", ())),
        replaced_by=raw.get("replaced_by", ""),
        subsumes=tuple(raw.get("subsumes", ())),
        fix=_fix(locate, raw.get("fix", ())),
    )


def _fix(locate: Locate, raw: list[dict[str, Any]]) -> tuple[FixAction, ...]:
    """The declared fix actions; their arguments may name only the finding's {path} and {unit}."""
    actions = []
    for i, item in enumerate(raw):
        action = with_defaults(item)
        for key, value in action.args.items():
            if "{" in _FIX_FIELD.sub("", value) or "}" in _FIX_FIELD.sub("", value):
                raise RulePackError(
                    f"fix argument {key}: only {{path}} and {{unit}} may be used",
                    where=locate(["fix", i, key]),
                )
        actions.append(action)
    return tuple(actions)


def _check(locate: Locate, at: list[str | int], raw: dict[str, Any]) -> CheckSpec:
    params = {k: v for k, v in raw.items() if k not in ("kind", "when", "unless")}
    try:
        arguments = typed_arguments(raw["kind"], params)
    except ParamError as exc:
        raise RulePackError(one_line(exc.message), where=locate([*at, *exc.path])) from None
    return CheckSpec(
        kind=raw["kind"],
        params=params,
        arguments=arguments,
        when=_conditions(locate, [*at, "when"], raw.get("when")),
        unless=_conditions(locate, [*at, "unless"], raw.get("unless")),
    )


def _conditions(locate: Locate, at: list[str | int], raw: Any) -> tuple[CheckSpec, ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        return (_check(locate, at, raw),)
    return tuple(_check(locate, [*at, i], item) for i, item in enumerate(raw))


def typed_arguments(kind_name: str, params: dict[str, Any]) -> object:
    """A kind's typed parameters from a dict its schema accepted, checked by the kind's ``validate``:
    built once, when the rule is loaded (raises ParamError)."""
    kind = registry()[kind_name]
    arguments = kind.arguments(params)
    kind.validate(arguments)
    return arguments


def override_params(rule: Rule, override: dict[str, Any], where: str) -> Rule:
    """The rule with some check parameters replaced, validated against the kind's schema."""
    import jsonschema

    kind = registry()[rule.check.kind]
    params = {**rule.check.params, **override}
    schema = {**kind.schema(), "additionalProperties": False}
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors({"kind": kind.name, **params})
    )
    if error is not None:
        raise ConfigError(one_line(f"parameters for {rule.id}: {error.message}"), where=where)
    try:
        arguments = typed_arguments(kind.name, params)
    except ParamError as exc:
        raise ConfigError(one_line(f"parameters for {rule.id}: {exc.message}"), where=where) from None
    return replace(rule, check=replace(rule.check, params=params, arguments=arguments))


def _check_template(where: str, template: str, allowed: set[str]) -> None:
    """Only plain ``{variable}`` fields, optionally with ``!r``/``!s`` and a width: the template is
    rendered with image data, so attribute access, indexing and nested fields are refused."""
    try:
        fields = [(f, conv, spec) for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise RulePackError(f"message template: {one_line(str(exc))}", where=where) from None
    for field, conversion, spec in fields:
        if not field.isidentifier():
            raise RulePackError(
                f"message field {shown('{' + field + '}')} must be a plain variable name",
                where=where,
            )
        if field not in allowed:
            known = ", ".join(sorted(allowed))
            raise RulePackError(
                one_line(
                    f"message uses {{{field}}}, which this check kind does not provide (known: {known})"
                ),
                where=where,
            )
        if conversion not in (None, "r", "s") or not _SAFE_SPEC.fullmatch(spec or ""):
            raise RulePackError(
                f"message field {{{field}}}: only !r, !s and a width up to 999 are allowed after the name",
                where=where,
            )
