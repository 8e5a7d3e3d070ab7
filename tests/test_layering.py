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
