"""imagelint.records.dataclass: the standard decorator's classes, with fewer methods compiled per class."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from imagelint import records


def _twins(options: dict[str, Any]) -> Iterator[type]:
    """The same class body made by the standard decorator, then by imagelint's."""
    for decorate in (dataclasses.dataclass, records.dataclass):

        class Base:
            a: int
            b: str = "x"
            c: tuple[int, ...] = dataclasses.field(default=(), repr=False)
            d: int = dataclasses.field(default=0, compare=False)
            e: int = dataclasses.field(default=0, hash=False)

        base = decorate(**options)(Base)

        class Child(base):  # type: ignore[valid-type,misc]
            f: tuple[int, ...] = ()

        yield decorate(**options)(Child)


OPTIONS = [
    {},
    {"frozen": True},
    {"frozen": True, "kw_only": True},
    {"slots": True},
    {"frozen": True, "slots": True},
    {"repr": False},
    {"eq": False},
    {"eq": False, "frozen": True},
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_the_methods_behave_as_the_standard_librarys(options: dict[str, Any]) -> None:
    stdlib, ours = _twins(options)
    made: list[list[Any]] = []
    for cls in (stdlib, ours):
        one, same, other_d, other_e, other_a = (
            cls(a=1, c=(1,), f=(2,)),
            cls(a=1, c=(1,), f=(2,)),
            cls(a=1, c=(1,), d=5, f=(2,)),
            cls(a=1, c=(1,), e=5, f=(2,)),
            cls(a=2, c=(1,), f=(2,)),
        )
        text = repr(one).replace(cls.__qualname__, "X")
        hashes = (
            [hash(one) == hash(same), hash(one) == hash(other_d), hash(one) == hash(other_e)]
            if cls.__hash__ is not None and (options.get("frozen") and options.get("eq", True))
            else [cls.__hash__ is None, type(cls.__hash__)]
        )
        made.append(
            [
                text if options.get("repr", True) else "",
                one == same,
                one == other_d,
                one == other_e,
                one == other_a,
                one == (1, "x"),
                one.__eq__(object()),
                *hashes,
                [f.name for f in dataclasses.fields(cls)],
                cls.__match_args__ if hasattr(cls, "__match_args__") else None,
            ]
        )
    assert made[0] == made[1]


def test_a_frozen_instance_hashes_as_the_standard_one_does() -> None:
    stdlib, ours = _twins({"frozen": True})
    assert hash(stdlib(a=3, b="y", f=(1,))) == hash(ours(a=3, b="y", f=(1,)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours(a=3).a = 4  # type: ignore[misc]


def test_a_cycle_back_to_the_instance_shows_as_an_ellipsis() -> None:
    @records.dataclass
    class Node:
        name: str
        children: list[Any] = dataclasses.field(default_factory=list)

    node = Node("n")
    node.children.append(node)
    assert repr(node).endswith(".<locals>.Node(name='n', children=[...])")


def test_one_field_and_no_field_compare_as_tuples() -> None:
    @records.dataclass(frozen=True)
    class One:
        x: int

    @records.dataclass(frozen=True)
    class Empty:
        pass

    assert One(1) == One(1) and One(1) != One(2) and hash(One(1)) == hash((1,))
    assert Empty() == Empty() and hash(Empty()) == hash(())


def test_a_class_with_its_own_methods_gets_the_standard_decorator() -> None:
    @records.dataclass(order=True, frozen=True)
    class Ordered:
        x: int

    @records.dataclass
    class Shown:
        x: int

        def __repr__(self) -> str:
            return "shown"

    assert Ordered(1) < Ordered(2)
    assert repr(Shown(1)) == "shown" and Shown(1) == Shown(1)


def _compilations(make: Callable[[], object]) -> int:
    events: list[str] = []
    hook_on = [True]

    def hook(event: str, _args: object) -> None:
        if hook_on[0] and event == "compile":
            events.append(event)

    sys.addaudithook(hook)
    try:
        make()
    finally:
        hook_on[0] = False  # audit hooks cannot be removed
    return len(events)


def _frozen_params(decorate: Callable[..., Any]) -> Callable[[], object]:
    def make() -> object:
        class Params:
            a: int = 0
            b: str = ""

        return decorate(frozen=True, kw_only=True)(Params)

    return make


def test_only_init_is_compiled_per_class() -> None:
    assert _compilations(_frozen_params(dataclasses.dataclass)) == 6  # __init__, the 2 guards, and 3
    assert _compilations(_frozen_params(records.dataclass)) == 1


def test_the_frozen_guards_are_the_standard_ones_where_their_helper_is_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert records._guards_known() == (sys.version_info < (3, 13))  # 3.13 rewrote the helper
    monkeypatch.setattr(records, "_SHARE_GUARDS", False)
    assert _compilations(_frozen_params(records.dataclass)) == 3  # __init__ and the standard guards


def test_the_standard_helper_is_given_back_even_when_the_decorator_refuses_the_class() -> None:
    class OwnSetattr:
        a: int = 0

        def __setattr__(self, name: str, value: Any) -> None: ...

    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
        records.dataclass(frozen=True)(OwnSetattr)
    assert dataclasses._frozen_get_del_attr is records._STDLIB_GUARDS  # type: ignore[attr-defined]
    assert not records._LENDING.locked()


def _attempts(cls: type) -> list[str]:
    """What assigning and deleting a field and another attribute do, on the class and a subclass."""

    class Plain(cls):  # type: ignore[valid-type,misc]
        pass

    done = []
    for instance in (cls(a=1), Plain(a=1)):
        for attempt in (
            lambda instance=instance: setattr(instance, "a", 2),
            lambda instance=instance: delattr(instance, "a"),
            lambda instance=instance: setattr(instance, "other", 3),
            lambda instance=instance: delattr(instance, "other"),
            lambda instance=instance: delattr(instance, "missing"),
        ):
            try:
                attempt()
                done.append("done")
            except (dataclasses.FrozenInstanceError, AttributeError) as exc:
                done.append(f"{type(exc).__name__}: {exc}")
    return done


def test_a_frozen_class_refuses_what_the_standard_one_refuses() -> None:
    stdlib, ours = _twins({"frozen": True})
    assert _attempts(ours) == _attempts(stdlib)
    assert _attempts(ours)[:4] == [
        "FrozenInstanceError: cannot assign to field 'a'",
        "FrozenInstanceError: cannot delete field 'a'",
        "FrozenInstanceError: cannot assign to field 'other'",
        "FrozenInstanceError: cannot delete field 'other'",
    ]
    for method in ("__setattr__", "__delattr__"):
        assert getattr(ours, method).__qualname__ == getattr(stdlib, method).__qualname__


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"slots": True}], ids=str)
def test_a_class_keeps_its_docstring_and_gets_none_written_from_its_signature(
    options: dict[str, Any],
) -> None:
    import inspect

    class Undocumented:
        a: int = 0

    class Documented:
        """Its own words."""

        a: int = 0

    asked: list[object] = []
    real = inspect.signature

    def signature(obj: Any, **kwargs: Any) -> inspect.Signature:
        asked.append(obj)
        return real(obj, **kwargs)

    inspect.signature = signature  # type: ignore[assignment]
    try:
        undocumented = records.dataclass(**options)(Undocumented)
        documented = records.dataclass(**options)(Documented)
    finally:
        inspect.signature = real
    assert (undocumented.__doc__, documented.__doc__, asked) == (None, "Its own words.", [])
    assert repr(undocumented(a=1)).endswith("Undocumented(a=1)")


def test_no_module_of_the_package_uses_the_standard_decorator() -> None:
    """CONTRIBUTING: dataclasses of the package are made with records.dataclass (a standard one costs
    an offline audit about twice as much to define)."""
    package = Path(records.__file__).parent
    standard = re.compile(r"^from dataclasses import .*\bdataclass\b(?!es)|@dataclasses\.dataclass\b", re.M)
    users = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name != "records.py" and standard.search(path.read_text())
    ]
    assert users == []
