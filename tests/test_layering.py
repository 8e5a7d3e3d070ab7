"""Import hygiene of the package: the layers contract (import-linter, configured in pyproject.toml)
holds and would catch an upward import, no module is part of an import circle, and no module reaches
into another module's private names."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.support import REPO


def test_no_private_name_is_imported_from_another_module() -> None:
    offenders = []
    for path in sorted((REPO / "imagelint").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("imagelint"):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                if private:
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module} {private}")
    assert offenders == []


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the package found first on PYTHONPATH=project, with project's pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(project / "pyproject.toml"), "--no-cache"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_layers_contract_is_kept() -> None:
    proc = _lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imagelint layers KEPT" in proc.stdout


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("imagelint.facts.sshd", "imagelint.cli.app"),  # a parser importing a command
        ("imagelint.facts.cgroups", "imagelint.probes.cgroups"),  # a parser reading the live host
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path: Path, importer: str, imported: str) -> None:
    """The contract is not vacuous: an upward import, even a lazy one, fails it."""
    shutil.copytree(REPO / "imagelint", tmp_path / "imagelint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    module = tmp_path.joinpath(*importer.split(".")).with_suffix(".py")
    upward = f"\n\ndef _upward() -> None:\n    import {imported}  # noqa: F401\n"
    module.write_text(module.read_text() + upward)
    proc = _lint_imports(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "imagelint layers BROKEN" in proc.stdout
    assert f"{importer} -> {imported}" in proc.stdout


def test_no_module_is_part_of_an_import_circle() -> None:
    graph = grimp.build_graph("imagelint")
    circles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                circles.add(" -> ".join((module, *back)))
    assert sorted(circles) == []
