"""Each kind of plug-in has one explicit list (formats, check kinds, openers), and every module of its
package is in that list or declared a helper: a helper file added and forgotten can neither become a
format nor be missed as a check kind (yamllint's rules table is the model)."""

from __future__ import annotations

import importlib
import pkgutil

import imagelint.checks
import imagelint.formats
import imagelint.openers
from imagelint.checks import KIND_MODULES, registry
from imagelint.checks.base import HELPERS as CHECK_HELPERS
from imagelint.formats import FORMATS, get_formatter
from imagelint.formats import HELPERS as FORMAT_HELPERS
from imagelint.openers import OPENER_MODULES, openers
from tests.support import REPO


def _modules(package: object) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(package.__path__)}  # type: ignore[attr-defined]


def test_every_format_module_is_listed_or_a_helper_and_names_itself() -> None:
    assert list(FORMATS)[:6] == ["text", "json", "sarif", "junit", "github", "markdown"]
    listed = {module.rsplit(".", 1)[1] for module in FORMATS.values()}
    assert listed.isdisjoint(FORMAT_HELPERS)
    assert _modules(imagelint.formats) == listed | FORMAT_HELPERS
    for name in FORMATS:
        assert get_formatter(name).name == name


def test_every_module_of_the_checks_package_is_listed_or_a_helper_and_its_kinds_registered() -> None:
    assert _modules(imagelint.checks) == set(KIND_MODULES) | CHECK_HELPERS
    kinds = registry()
    for name in KIND_MODULES:
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
    for name in CHECK_HELPERS:  # a helper defines no kind
        module = importlib.import_module(f"imagelint.checks.{name}")
        assert not [k for k in kinds.values() if type(k).__module__ == module.__name__], name


def test_every_module_of_the_openers_package_is_listed_and_defines_an_opener() -> None:
    assert _modules(imagelint.openers) == set(OPENER_MODULES)
    kinds = [opener.kind for opener in openers()]
    assert len(kinds) == len(set(kinds)) == len(OPENER_MODULES)
    assert [o.order for o in openers()] == sorted(o.order for o in openers())


def test_every_cli_module_that_registers_commands_is_listed() -> None:
    """``load_commands`` imports only the modules ``COMMAND_MODULES`` lists: one that registers a
    command and is not listed would never be registered at all."""
    import imagelint.cli
    from imagelint.cli.app import COMMAND_MODULES

    def registers(name: str) -> bool:
        source = (REPO / "imagelint" / "cli" / f"{name}.py").read_text(encoding="utf-8")
        return "@command(" in source or "add_typer(" in source

    registering = {name for name in _modules(imagelint.cli) if registers(name)}
    assert registering == set(COMMAND_MODULES.values()) | {"app", "application"}
