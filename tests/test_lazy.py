"""Packages whose names are imported on first use (imagelint/lazy.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from imagelint import lazy


def test_a_submodule_import_does_not_load_the_package_exports() -> None:
    """``imagelint.report.escape`` (what every stderr line needs) loads neither the report model nor
    the rule packs; the package's names still import, from the module that defines them."""
    code = (
        "import sys\nimport imagelint.report.escape\n"
        "print('imagelint.report.model' in sys.modules, 'imagelint.rulepacks.loader' in sys.modules)\n"
        "from imagelint.report import Finding\nfrom imagelint.rulepacks import load_packs\n"
        "print(Finding.__module__, load_packs.__module__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.splitlines() == [
        "False False",
        "imagelint.report.model imagelint.rulepacks.loader",
    ]


def test_an_unknown_name_is_an_attribute_error() -> None:
    getattr_ = lazy.exports("imagelint.report", {"model": ("Finding",)})
    with pytest.raises(AttributeError, match=r"module 'imagelint\.report' has no attribute 'Nope'"):
        getattr_("Nope")
    import imagelint.report

    assert getattr_("Finding") is imagelint.report.Finding


@pytest.mark.parametrize("package", ["imagelint.report", "imagelint.rulepacks", "imagelint.facts.journal"])
def test_every_exported_name_imports(package: str) -> None:
    """Each name a lazy package lists in ``__all__`` comes from the module its map names (a name
    moved to another module without the map following fails here, not at a user's first use)."""
    code = (
        f"import importlib\npackage = importlib.import_module({package!r})\n"
        "print(sorted(n for n in package.__all__ if getattr(package, n, None) is None))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout
