"""Typed check parameters: each kind's frozen dataclass, and the JSON Schema generated from it.

A check kind declares its parameters as one frozen, keyword-only dataclass (``CheckKind.parameters``).
Every field is written ``name: Annotated[type, Param("description", **keywords)] = default``:

- the type is what mypy checks and what the schema's type is made from: ``bool``, ``int``,
  ``float``, ``str``, ``str | int``, a ``Literal`` of strings or an ``Enum`` (an ``enum`` of its
  values), ``tuple[X, ...]`` (an array), ``Mapping[str, str]`` (an object of strings), another
  parameters dataclass (an object without other keys), a :class:`ParamType` (a nested check spec),
  and ``X | None`` for a parameter that may be absent (default None);
- ``Param`` gives the description (every parameter has one) and any further JSON Schema keywords
  (``minimum``, ``minItems``, ``pattern``...); keywords for an array's items go on the item type,
  ``tuple[Annotated[str, Param(pattern="^/")], ...]``;
- the Python default is the one default: a field without one is required, and a scalar default (a
  bool, number or string) is published in the schema as ``default``.

:func:`properties` and :func:`required` generate a kind's schema; :func:`build` makes the typed
instance from a dict that schema accepted (the rule loader does, once per check spec). Parameters
several kinds share are here too: :class:`UnitSelection` (``units`` / ``exclude_units``).
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import sys
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar, Union

from imagelint.records import dataclass

T = TypeVar("T")

_SCALARS: dict[object, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}


class ParamError(Exception):
    """A parameter the schema accepts that cannot be used (a regex that does not compile); ``path``
    leads from the check spec to it."""

    def __init__(self, path: list[str | int], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class Param:
    """The description and further JSON Schema keywords of a parameter (or of an array's items)."""

    def __init__(self, description: str = "", **keywords: Any) -> None:
        self.description = description
        self.keywords = keywords


class ParamType:
    """A parameter type with a schema and a construction of its own (a nested check spec:
    :class:`imagelint.checks.base.CheckCall`): subclasses give both."""

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_value(cls, value: Any) -> Any:
        """The typed value of a value its schema accepted."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class NoParameters:
    """The parameters of a kind that takes none."""


UnitGlobs = Annotated[
    tuple[str, ...], Param("unit name globs to consider (on unit files, aliases match too); default all")
]


@dataclass(frozen=True, kw_only=True)
class UnitSelection:
    """``units`` and ``exclude_units``: which units a kind considers. Kinds on the unit index match
    aliases and templates too (:func:`imagelint.facts.systemd.enablement.unit_matches`);
    :meth:`selects` applies them to a plain unit name (journal records, the live manager's units)."""

    units: UnitGlobs = ()
    exclude_units: Annotated[tuple[str, ...], Param("unit globs to leave out")] = ()

    def selects(self, name: str) -> bool:
        """Whether a unit name passes the ``units`` and ``exclude_units`` globs."""
        if self.units and not any(fnmatch.fnmatchcase(name, g) for g in self.units):
            return False
        return not any(fnmatch.fnmatchcase(name, g) for g in self.exclude_units)


def properties(cls: type) -> dict[str, Any]:
    """The JSON Schema ``properties`` of a parameters dataclass."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        schema = _schema(hints[f.name])
        if not schema.get("description"):
            raise TypeError(f"parameter {cls.__name__}.{f.name} has no description")
        if isinstance(f.default, bool | int | float | str):
            schema["default"] = f.default
        out[f.name] = schema
    return out


def required(cls: type) -> list[str]:
    """The parameters of a dataclass without a default, in order."""
    missing = dataclasses.MISSING
    return [f.name for f in dataclasses.fields(cls) if f.default is missing and f.default_factory is missing]


def build(cls: type[T], data: Mapping[str, Any]) -> T:
    """The typed parameters from a dict their schema accepted; a nested check spec that its own
    kind's schema refuses raises :class:`ParamError` with the path to it."""
    values = {}
    for name, value in data.items():
        try:
            values[name] = _value(_hint(cls, name), value)
        except ParamError as exc:
            raise ParamError([name, *exc.path], exc.message) from None
    return cls(**values)


_HINTS: dict[tuple[type, str], Any] = {}
_ABSENT = object()


def _hint(cls: type, name: str) -> Any:
    """The resolved annotation of one field of a parameters dataclass, as ``typing.get_type_hints``
    gives it. Resolving evaluates a string: once per field, and only for the fields rules set
    (``get_type_hints`` evaluates every field of the class and of each of its bases, at each call)."""
    hint = _HINTS.get((cls, name), _ABSENT)
    if hint is _ABSENT:
        hint = _HINTS[cls, name] = _resolved(cls, name)
    return hint


def _resolved(cls: type, name: str) -> Any:
    for owner in cls.__mro__:
        annotation = vars(owner).get("__annotations__", {}).get(name, _ABSENT)
        if annotation is _ABSENT:
            continue
        if isinstance(annotation, str):  # ``from __future__ import annotations``; get_type_hints' namespaces
            annotation = eval(annotation, dict(vars(owner)), vars(sys.modules[owner.__module__]))
        return type(None) if annotation is None else annotation
    raise KeyError(name)


def _unwrap(tp: Any) -> tuple[Any, Param | None]:
    """The type inside ``Annotated`` and its ``Param``, if any."""
    if typing.get_origin(tp) is Annotated:
        inner, *extras = typing.get_args(tp)
        return inner, next((e for e in extras if isinstance(e, Param)), None)
    return tp, None


def _arms(tp: Any) -> list[Any] | None:
    """The types of a union other than None; None when ``tp`` is no union."""
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return None
    return [a for a in typing.get_args(tp) if a is not type(None)]


def _schema(annotated: Any) -> dict[str, Any]:
    tp, param = _unwrap(annotated)
    schema = _type_schema(tp)
    if param is not None:
        schema.update(param.keywords)
        if param.description:
            schema["description"] = param.description
    return schema


def _type_schema(tp: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    arms = _arms(tp)
    if arms is not None:
        return _schema(arms[0]) if len(arms) == 1 else {"type": [_SCALARS[a] for a in arms]}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if origin is Literal:
        return {"enum": list(args)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _schema(args[0])}
    if origin is Mapping and args[0] is str:
        return {"type": "object", "additionalProperties": _schema(args[1])}
    if isinstance(tp, type) and issubclass(tp, ParamType):
        return tp.json_schema()
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
        if names := required(tp):
            schema["required"] = names
        schema["properties"] = properties(tp)
        return schema
    raise TypeError(f"no JSON Schema for the parameter type {tp!r}")


def _value(annotated: Any, value: Any) -> Any:
    """``value`` (as the schema accepted it) as the Python type of ``annotated``."""
    tp, _ = _unwrap(annotated)
    arms = _arms(tp)
    if arms is not None:
        return _value(arms[0], value) if len(arms) == 1 else value
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple:
        return tuple(_item(args[0], i, v) for i, v in enumerate(value))
    if typing.get_origin(tp) is Mapping:
        return types.MappingProxyType(dict(value))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if isinstance(tp, type) and issubclass(tp, ParamType):
        return tp.from_value(value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return build(tp, value)
    return value  # a scalar or a literal: the schema checked it


def _item(annotated: Any, index: int, value: Any) -> Any:
    try:
        return _value(annotated, value)
    except ParamError as exc:
        raise ParamError([index, *exc.path], exc.message) from None
