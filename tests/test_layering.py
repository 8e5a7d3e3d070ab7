"""Import hygiene of the package: no module reaches into another module's private names."""

from __future__ import annotations

import ast

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


def _imports(path) -> list[tuple[int, str]]:
    """(line, module) of every imagelint import in a file, at any depth (lazy imports count too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("imagelint"):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("imagelint")]
    return found


# Arrows the layering forbids: a layer never imports one above it (data flows target -> facts ->
# checks -> engine -> report/formats -> commands). Commands (cli, soak, aws, session) sit on top.
FORBIDDEN = {
    "imagelint/targets": (
        "imagelint.facts",
        "imagelint.checks",
        "imagelint.engine",
        "imagelint.cli",
        "imagelint.soak",
        "imagelint.aws",
        "imagelint.formats",
        "imagelint.session",
    ),
    "imagelint/facts": (
        "imagelint.checks",
        "imagelint.engine",
        "imagelint.cli",
        "imagelint.soak",
        "imagelint.aws",
        "imagelint.formats",
        "imagelint.session",
        "imagelint.rulepacks",
    ),
    "imagelint/checks": (
        "imagelint.engine",
        "imagelint.cli",
        "imagelint.soak",
        "imagelint.aws",
        "imagelint.formats",
        "imagelint.session",
    ),
    "imagelint/report": (
        "imagelint.checks",
        "imagelint.engine",
        "imagelint.cli",
        "imagelint.soak",
        "imagelint.aws",
        "imagelint.formats",
        "imagelint.session",
        "imagelint.facts",
    ),
    "imagelint/formats": (
        "imagelint.checks",
        "imagelint.engine",
        "imagelint.cli",
        "imagelint.soak",
        "imagelint.aws",
        "imagelint.session",
        "imagelint.facts",
    ),
}


def test_no_layer_imports_one_above_it() -> None:
    offenders = []
    for layer, banned in FORBIDDEN.items():
        for path in sorted((REPO / layer).rglob("*.py")):
            for line, module in _imports(path):
                if module.startswith(banned):
                    offenders.append(f"{path.relative_to(REPO)}:{line}: imports {module}")
    assert offenders == []
