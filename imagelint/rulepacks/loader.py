"""Read rule packs from YAML, validate them, and turn them into Rule objects.

Every refusal names file:line:column: YAML syntax, schema violations (unknown key, wrong type,
unknown check kind), parameters a kind rejects (a regex that does not compile), message templates
that use a variable the kind does not provide, and duplicate rule ids across all loaded packs.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from imagelint.checks import ParamError, registry
from imagelint.errors import ConfigError, RulePackError
from imagelint.rulepacks import cache
from imagelint.rulepacks.model import CheckSpec, Rule, RulePack, RuleStatus, Scope, Severity
from imagelint.rulepacks.schema import rules_schema
from imagelint.usertext import one_line, shown
from imagelint.yamlsource import YamlDocument, first_schema_error, parse_yaml, read_yaml_bytes

COMMON_VARIABLES = {"id", "name", "subject", "path", "line", "unit"}
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
    """One pack: as loaded by an earlier run from the same bytes (:mod:`imagelint.rulepacks.cache`),
    else parsed, validated against the schema and built rule by rule (then kept for the next run)."""
    pack_bytes = read_yaml_bytes(path, error=RulePackError)
    kept = cache.recall(path, pack_bytes, builtin=builtin)
    if kept is not None:
        return kept
    document = parse_yaml(str(path), pack_bytes, error=RulePackError)
    if document.data is None:
        raise RulePackError("is empty; a rule pack needs a 'rules:' list", where=document.locate([]))
    first_schema_error(document, rules_schema(), RulePackError)
    data = document.data
    meta = data.get("pack", {})
    pack = RulePack(
        name=meta.get("name", path.stem),
        path=str(path),
        sha256=hashlib.sha256(pack_bytes).hexdigest(),
        description=meta.get("description", ""),
        builtin=builtin,
    )
    for index, raw in enumerate(data["rules"]):
        pack.rules.append(_rule(document, ["rules", index], raw, pack.name))
    cache.keep(path, pack_bytes, pack)  # only once every rule in it has been built without error
    return pack


def _rule(document: YamlDocument, at: list[str | int], raw: dict[str, Any], pack: str) -> Rule:
    check = _check(document, [*at, "check"], raw["check"])
    kind = registry()[check.kind]
    _check_template(document, [*at, "message"], raw["message"], COMMON_VARIABLES | set(kind.variables))
    if raw["id"] in raw.get("subsumes", ()):
        where = document.locate([*at, "subsumes", raw["subsumes"].index(raw["id"])])
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
        source=document.locate(at),
        example=raw.get("example"),
        negative_example=raw.get("negative_example"),
        status=RuleStatus(raw.get("status", "stable")),
        since=raw.get("since", ""),
        renamed_from=tuple(raw.get("renamed_from", ())),
        replaces=tuple(raw.get("replaces", ())),
        replaced_by=raw.get("replaced_by", ""),
        subsumes=tuple(raw.get("subsumes", ())),
    )


def _check(document: YamlDocument, at: list[str | int], raw: dict[str, Any]) -> CheckSpec:
    params = {k: v for k, v in raw.items() if k not in ("kind", "when", "unless")}
    try:
        arguments = typed_arguments(raw["kind"], params)
    except ParamError as exc:
        raise RulePackError(one_line(exc.message), where=document.locate([*at, *exc.path])) from None
    return CheckSpec(
        kind=raw["kind"],
        params=params,
        arguments=arguments,
        when=_conditions(document, [*at, "when"], raw.get("when")),
        unless=_conditions(document, [*at, "unless"], raw.get("unless")),
    )


def _conditions(document: YamlDocument, at: list[str | int], raw: Any) -> tuple[CheckSpec, ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        return (_check(document, at, raw),)
    return tuple(_check(document, [*at, i], item) for i, item in enumerate(raw))


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


def _check_template(document: YamlDocument, at: list[str | int], template: str, allowed: set[str]) -> None:
    """Only plain ``{variable}`` fields, optionally with ``!r``/``!s`` and a width: the template is
    rendered with image data, so attribute access, indexing and nested fields are refused."""
    try:
        fields = [(f, conv, spec) for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise RulePackError(f"message template: {one_line(str(exc))}", where=document.locate(at)) from None
    for field, conversion, spec in fields:
        if not field.isidentifier():
            raise RulePackError(
                f"message field {shown('{' + field + '}')} must be a plain variable name",
                where=document.locate(at),
            )
        if field not in allowed:
            known = ", ".join(sorted(allowed))
            raise RulePackError(
                one_line(
                    f"message uses {{{field}}}, which this check kind does not provide (known: {known})"
                ),
                where=document.locate(at),
            )
        if conversion not in (None, "r", "s") or not _SAFE_SPEC.fullmatch(spec or ""):
            raise RulePackError(
                f"message field {{{field}}}: only !r, !s and a width up to 999 are allowed after the name",
                where=document.locate(at),
            )
