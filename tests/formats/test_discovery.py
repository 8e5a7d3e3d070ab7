"""Formats and check kinds are found by discovery: a new one is one module plus its test."""

from __future__ import annotations

import importlib
import pkgutil

import imagelint.checks
from imagelint.checks import kind_modules, registry
from imagelint.formats import FORMATS, get_formatter


def test_every_format_module_is_found_and_names_itself() -> None:
    assert list(FORMATS)[:6] == ["text", "json", "sarif", "junit", "github", "markdown"]
    for name in FORMATS:
        assert get_formatter(name).name == name


def test_every_module_of_the_checks_package_is_loaded_and_its_kinds_registered() -> None:
    kinds = registry()
    for name in kind_modules():
        module = importlib.import_module(f"imagelint.checks.{name}")
        defined = [
            obj.name
            for obj in vars(module).values()
            if isinstance(obj, type)
            and getattr(obj, "__module__", "") == module.__name__
            and hasattr(obj, "evaluate")
            and isinstance(getattr(obj, "name", None), str)
        ]
        assert defined and all(k in kinds for k in defined), name
    listed = {m.name for m in pkgutil.iter_modules(imagelint.checks.__path__)}
    assert set(kind_modules()) == listed - {"base", "params"}
