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
from imagelint.rulepacks import validated
from imagelint.rulepacks.model import CheckSpec, Rule, RulePack, RuleStatus, Scope, Severity
from imagelint.rulepacks.schema import rules_schema
from imagelint.yamlsource import YamlDocument, first_schema_error, load_yaml, one_line, shown

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
    document = load_yaml(path, error=RulePackError)
    if document.data is None:
        raise RulePackError("is empty; a rule pack needs a 'rules:' list", where=document.locate([]))
    pack_bytes = path.read_bytes()
    checked = validated.already_valid(pack_bytes)
    if not checked:
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
        pack.rules.append(_rule(document, ["rules", index], raw, pack.name, checked))
    validated.remember_valid(pack_bytes)  # only once every rule in it has been built without error
    return pack


def _rule(document: YamlDocument, at: list[str | int], raw: dict[str, Any], pack: str, checked: bool) -> Rule:
    check = _check(document, [*at, "check"], raw["check"], checked)
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


def _check(document: YamlDocument, at: list[str | int], raw: dict[str, Any], checked: bool) -> CheckSpec:
    """``checked``: the pack's bytes passed every check before (nested specs need no validation)."""
    params = {k: v for k, v in raw.items() if k not in ("kind", "when", "unless")}
    try:
        arguments = typed_arguments(raw["kind"], params, checked=checked)
    except ParamError as exc:
        raise RulePackError(one_line(exc.message), where=document.locate([*at, *exc.path])) from None
    return CheckSpec(
        kind=raw["kind"],
        params=params,
        arguments=arguments,
        when=_conditions(document, [*at, "when"], raw.get("when"), checked),
        unless=_conditions(document, [*at, "unless"], raw.get("unless"), checked),
    )


def _conditions(
    document: YamlDocument, at: list[str | int], raw: Any, checked: bool
) -> tuple[CheckSpec, ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        return (_check(document, at, raw, checked),)
    return tuple(_check(document, [*at, i], item, checked) for i, item in enumerate(raw))


def typed_arguments(kind_name: str, params: dict[str, Any], *, checked: bool = False) -> object:
    """A kind's typed parameters from a dict its schema accepted, checked by the kind's ``validate``:
    built once, when the rule is loaded (raises ParamError). ``checked``: nested check specs are
    known to pass their kinds' schemas (:func:`imagelint.checks.params.build`)."""
    kind = registry()[kind_name]
    arguments = kind.arguments(params, checked=checked)
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
