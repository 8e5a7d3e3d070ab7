"""Typed check parameters: the schema generated from each kind's dataclass is the one rule packs were
validated against (``kind_schemas.json``, the schemas before they were generated, without their
descriptions), its defaults are the dataclasses' defaults, and a validated dict becomes the typed
instance with every value it set."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import pytest

from imagelint.checks import registry
from imagelint.checks.base import CheckCall
from imagelint.checks.params import Param, UnitSelection, _hint, build, properties
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.rulepacks.model import CheckSpec
from imagelint.rulepacks.schema import rules_schema

PINNED: dict[str, Any] = json.loads((Path(__file__).parent / "kind_schemas.json").read_text())
KINDS = sorted(PINNED)


def _without_descriptions(schema: Any) -> Any:
    """The schema less every ``description`` keyword (a parameter named so would stay)."""
    if isinstance(schema, list):
        return [_without_descriptions(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: {name: _without_descriptions(s) for name, s in value.items()}
        if key == "properties"
        else _without_descriptions(value)
        for key, value in schema.items()
        if key != "description"
    }


def _pack_errors(check: dict[str, Any]) -> list[str]:
    """What the rule-pack schema says about a rule with this check."""
    rule = {
        "id": "X100",
        "name": "x",
        "title": "t",
        "severity": "low",
        "scope": ["image"],
        "check": check,
        "message": "m",
        "remediation": "r",
    }
    validator = jsonschema.Draft202012Validator(rules_schema())
    return [e.message for e in validator.iter_errors({"rules": [rule]})]


def _sample(schema: dict[str, Any]) -> Any:
    """A value the property's schema accepts."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"][0] if isinstance(schema["type"], list) else schema["type"]
    return {"integer": 1, "number": 1, "string": "/x", "boolean": True}.get(kind) or [
        _sample(schema["items"])
    ]


def _wrong(schema: dict[str, Any]) -> Any:
    """A value of a type the property's schema refuses."""
    if "enum" in schema:
        return "no-such-value"
    if isinstance(schema["type"], list):
        return []
    return 1 if schema["type"] == "string" else "text"


def _minimal(name: str) -> dict[str, Any]:
    """The kind's check with its required parameters only."""
    props = registry()[name].schema()["properties"]
    return {"kind": name, **{p: _sample(props[p]) for p in registry()[name].schema()["required"][1:]}}


def test_every_built_in_kind_is_pinned() -> None:
    assert sorted(registry()) == KINDS, "a new kind: add its schema to tests/checks/kind_schemas.json"


@pytest.mark.parametrize("name", KINDS)
def test_the_generated_schema_is_the_pinned_one_plus_descriptions(name: str) -> None:
    schema = registry()[name].schema()
    assert _without_descriptions(schema) == PINNED[name]
    published = rules_schema()["$defs"][f"kind:{name}"]
    assert {k: v for k, v in published["properties"].items() if k not in ("when", "unless")} == (
        schema["properties"]
    )
    assert published["required"] == schema["required"]
    for parameter, property_schema in schema["properties"].items():
        assert parameter == "kind" or property_schema["description"], parameter


@pytest.mark.parametrize("name", KINDS)
def test_the_rule_pack_schema_refuses_unknown_missing_and_mistyped_parameters(name: str) -> None:
    minimal = _minimal(name)
    assert _pack_errors(minimal) == []
    assert _pack_errors({**minimal, "no_such_parameter": 1})
    for parameter in minimal.keys() - {"kind"}:
        assert _pack_errors({k: v for k, v in minimal.items() if k != parameter}), parameter
    for parameter, schema in registry()[name].schema()["properties"].items():
        if parameter != "kind":
            assert _pack_errors({**minimal, parameter: _wrong(schema)}), parameter


@pytest.mark.parametrize("name", KINDS)
def test_every_default_is_the_dataclass_default_and_the_schema_accepts_it(name: str) -> None:
    kind = registry()[name]
    minimal = _minimal(name)
    built = kind.arguments({k: v for k, v in minimal.items() if k != "kind"})
    schema = kind.schema()["properties"]
    for field in dataclasses.fields(kind.parameters):
        if field.name in minimal:
            continue
        assert getattr(built, field.name) == field.default, field.name
        if "default" in schema[field.name]:
            assert schema[field.name]["default"] == field.default, field.name
            jsonschema.validate(field.default, schema[field.name])
        else:  # only "absent" is left unpublished: no value the code would assume behind the schema
            assert field.default is None or field.default == () or dataclasses.is_dataclass(field.default)


def _plain(value: Any) -> Any:
    """Typed parameters as the JSON they were built from (with their defaults filled in)."""
    if isinstance(value, CheckCall):
        return {"kind": value.kind, **_plain(value.arguments)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _keeps(raw: Any, plain: Any) -> bool:
    """Every value ``raw`` sets is in ``plain``, unchanged."""
    if isinstance(raw, dict):
        return isinstance(plain, dict) and all(k in plain and _keeps(v, plain[k]) for k, v in raw.items())
    if isinstance(raw, list):
        return isinstance(plain, list) and len(raw) == len(plain) and all(map(_keeps, raw, plain))
    return type(raw) is type(plain) and raw == plain


def _specs(spec: CheckSpec) -> list[CheckSpec]:
    return [spec, *(s for c in (*spec.when, *spec.unless) for s in _specs(c))]


def test_built_in_rules_get_typed_parameters_with_every_value_they_set() -> None:
    specs = [
        s for p in load_packs([], builtin=builtin_pack_paths()) for r in p.rules for s in _specs(r.check)
    ]
    assert len(specs) > 45
    for spec in specs:
        assert isinstance(spec.arguments, registry()[spec.kind].parameters), spec.kind
        assert _keeps(spec.params, _plain(spec.arguments)), spec
    # check specs inside parameters (IL206's evidence, IL501-IL503's configuration) are typed too
    nested = [call for s in specs if hasattr(s.arguments, "calls") for _, call in s.arguments.calls()]
    assert len(nested) >= 9
    for call in nested:
        assert isinstance(call.arguments, registry()[call.kind].parameters), call.kind


def test_a_nested_check_spec_is_built_with_its_own_kind_s_parameters() -> None:
    kind = registry()["systemd.boot_failure_loop"]
    unless = {"kind": "file.present", "paths": ["/etc/x"], "types": ["file"]}
    params = kind.arguments({"vendor_config": [{"units": ["a.service"], "unless": unless, "reason": "r"}]})
    [entry] = params.vendor_config
    assert entry.unless.kind == "file.present" and entry.unless.arguments.types == ("file",)
    assert entry.unless.arguments.paths == ("/etc/x",) and entry.units == ("a.service",)


def test_a_nested_check_spec_its_kind_refuses_is_a_param_error_with_its_path() -> None:
    from imagelint.checks import ParamError

    kind = registry()["systemd.boot_failure_loop"]
    for unless, path in (
        ({"kind": "file.nothing"}, ["vendor_config", 0, "unless"]),
        ({"kind": "file.present", "paths": "/etc/x"}, ["vendor_config", 0, "unless", "paths"]),
    ):
        with pytest.raises(ParamError) as refused:
            kind.arguments({"vendor_config": [{"units": [], "unless": unless, "reason": "r"}]})
        assert refused.value.path == path


def test_the_generator_refuses_a_parameter_without_description_or_with_an_unknown_type() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Undescribed:
        x: int = 1

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Unknown:
        x: Annotated[frozenset[str], Param("a set")] = frozenset()

    for cls in (Undescribed, Unknown):
        with pytest.raises(TypeError):
            properties(cls)


def test_unit_selection_applies_units_and_exclusions() -> None:
    params = build(UnitSelection, {"units": ["ecs*"], "exclude_units": ["ecs-init.service"]})
    assert params.selects("ecs.service")
    assert not params.selects("ecs-init.service")
    assert not params.selects("sshd.service")
    assert UnitSelection().selects("anything.service")


def _parameter_classes(cls: type) -> Iterator[type]:
    """A parameters dataclass and every dataclass nested in its fields' types."""
    yield cls
    for hint in typing.get_type_hints(cls, include_extras=True).values():
        for tp in [hint, *_arguments(hint)]:
            if dataclasses.is_dataclass(tp) and isinstance(tp, type):
                yield from _parameter_classes(tp)


def _shape(tp: Any) -> Any:
    """A type as comparable data (each evaluation of an annotation makes its own Param objects)."""
    if isinstance(tp, Param):
        return ("Param", tp.description, tp.keywords)
    if typing.get_origin(tp) is None:
        return tp
    return (typing.get_origin(tp), [_shape(arg) for arg in typing.get_args(tp)])


def _arguments(tp: Any) -> Iterator[Any]:
    for arg in typing.get_args(tp):
        yield arg
        yield from _arguments(arg)


@pytest.mark.parametrize("name", KINDS)
def test_a_field_s_type_is_the_one_get_type_hints_resolves(name: str) -> None:
    # build() resolves one field at a time (and only the fields a rule sets): the same types
    for cls in _parameter_classes(registry()[name].parameters):
        for field, hint in typing.get_type_hints(cls, include_extras=True).items():
            assert _shape(_hint(cls, field)) == _shape(hint), (cls, field)


def test_a_field_redeclared_in_a_subclass_has_the_subclass_s_type() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Narrower(UnitSelection):
        units: Annotated[tuple[Literal["a.service"], ...], Param("only a.service")] = ()

    resolved = typing.get_type_hints(Narrower, include_extras=True)
    assert _shape(_hint(Narrower, "units")) == _shape(resolved["units"])
    assert _shape(_hint(Narrower, "exclude_units")) == _shape(resolved["exclude_units"])
    assert _shape(_hint(Narrower, "units")) != _shape(_hint(UnitSelection, "units"))
    assert build(Narrower, {"units": ["a.service"]}).units == ("a.service",)
    with pytest.raises(KeyError):
        _hint(Narrower, "nothing")
