"""``dataclass``: the standard library's, with only ``__init__`` compiled per class.

The standard decorator writes each method it adds as source text and compiles it, per class: six
compilations for a frozen dataclass, over half a millisecond, and an offline audit defines some
eighty dataclasses (fifty of them frozen) before it reads a file. Here ``__init__`` is still the
standard library's; ``__repr__``, ``__eq__`` and ``__hash__``, and a frozen class's ``__setattr__``
and ``__delattr__``, are one function each, shared by every class, that read the class's fields as
the generated ones would: the same text, the same comparisons, the same hash values, the same
``FrozenInstanceError`` (``tests/test_records.py`` holds them against the standard library's on the
same classes). A class that asks for what they do not cover (``order``, ``unsafe_hash``, its own
``__repr__``, ``__eq__`` or ``__hash__``) gets the standard decorator as is.

The frozen guards go in through the standard decorator's own helper for them (the private
``dataclasses._frozen_get_del_attr``, lent for the call): on a Python whose helper is not the one
this module knows (3.13 rewrote it, and compiles a class's methods in one go), the standard
library's guards are compiled as before.

A class without a docstring keeps none: the standard decorator would write one from the class's
signature with ``inspect.signature`` (some 13 M instructions of a cloud image's audit), which nothing reads.
"""

from __future__ import annotations

import _thread
import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_OWN = ("__repr__", "__eq__", "__hash__")
_STDLIB_GUARDS = getattr(dataclasses, "_frozen_get_del_attr", None)
_LENDING = _thread.allocate_lock()  # one class at a time borrows the standard decorator's helper


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(**options: bool) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: type[T] | None = None, /, **options: Any) -> type[T] | Callable[[type[T]], type[T]]:
    """As :func:`dataclasses.dataclass` (same options and result), made without compiling the
    ``__repr__``, ``__eq__`` and ``__hash__`` of the class."""

    def wrap(cls: type[T]) -> type[T]:
        if options.get("order") or options.get("unsafe_hash") or any(name in cls.__dict__ for name in _OWN):
            return dataclasses.dataclass(cls, **options)
        undocumented = not cls.__dict__.get("__doc__")
        if undocumented:  # not empty, or the standard decorator writes one with inspect.signature
            cls.__doc__ = cls.__name__
        made: type[T] = _decorate(cls, {**options, "repr": False, "eq": False})
        if undocumented:
            made.__doc__ = None
        fields = dataclasses.fields(made)  # type: ignore[arg-type]
        if options.get("repr", True):
            made.__repr__ = _repr_of(tuple(f.name for f in fields if f.repr))  # type: ignore[method-assign]
        if options.get("eq", True):
            made.__eq__ = _eq_of(tuple(f.name for f in fields if f.compare))  # type: ignore[method-assign]
            if options.get("frozen", False):
                hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
                made.__hash__ = _hash_of(hashed)  # type: ignore[assignment,method-assign]
            else:
                made.__hash__ = None  # type: ignore[assignment]
        return made

    return wrap if cls is None else wrap(cls)


def _guards_known() -> bool:
    """Whether the standard decorator's helper for frozen guards is the one of Python 3.11 and 3.12."""
    code = getattr(_STDLIB_GUARDS, "__code__", None)
    return code is not None and code.co_varnames[: code.co_argcount] == ("cls", "fields", "globals")


_SHARE_GUARDS = _guards_known()


def _decorate(cls: type[T], options: dict[str, Any]) -> type[T]:
    """The standard decorator; a frozen class gets the shared guards, when the helper is known."""
    if not (options.get("frozen") and _SHARE_GUARDS):
        return dataclasses.dataclass(cls, **options)
    with _LENDING:
        dataclasses._frozen_get_del_attr = _frozen_guards  # type: ignore[attr-defined]
        try:
            return dataclasses.dataclass(cls, **options)
        finally:
            dataclasses._frozen_get_del_attr = _STDLIB_GUARDS  # type: ignore[attr-defined]


def _frozen_guards(
    cls: type[Any], fields: list[dataclasses.Field[Any]], _globals: dict[str, Any]
) -> tuple[Callable[[Any, str, Any], None], Callable[[Any, str], None]]:
    """``__setattr__`` and ``__delattr__`` as the standard helper writes them: on the class itself
    nothing is assigned or deleted, on a subclass no field; anything else goes to the next class."""
    names = tuple(f.name for f in fields)
    frozen_error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``names`` of an instance, as one tuple (also for one name, or none)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names)


def _repr_of(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()  # as the generated one: a cycle back to the instance shows as ...
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq_of(names: tuple[str, ...]) -> Callable[[Any, object], Any]:
    values = _values(names)

    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_of(names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__
