"""Every install hint, in the code and in the docs, is a command a user can run today.

No package index serves imagelint, so ``pip install 'imagelint[disk]'`` cannot work: a hint installs
from a clone (``'.[disk]'``) or from the repository (``'imagelint[disk] @ git+URL'``). Each hint is
extracted from where a user reads it (the error lines ``extra_hint`` makes, README, docs, the Packer
recipes, the examples) and run by pip for real, resolving against a copy of this checkout: the path
form in the copy, the git form with the repository's URL pointed at the copy made a git repository
(pip clones it). ``--dry-run --no-deps``: pip builds the metadata and reports what it would install.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from imagelint.errors import REPOSITORY, extra_hint
from tests.support import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS = sorted(PYPROJECT["project"]["optional-dependencies"])
SOURCES = [
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted((REPO / "packer").rglob("*.*")),
    *sorted((REPO / "examples").rglob("*.*")),
    REPO / "action.yml",
]
# pip's or pipx's install, its options, then the requirement (quoted, or a word)
HINT = re.compile(r"\bpipx? install ((?:-[-\w]+ )*)('[^']*'|\"[^\"]*\"|[^\s'\"`|)]+)")
GIT = re.compile(r"^imagelint(\[[\w,-]+\])? @ git\+" + re.escape(REPOSITORY) + r"(@[\w.${}-]+)?$")


def hints() -> dict[str, set[str]]:
    """Each requirement a hint installs -> where it is written."""
    found: dict[str, set[str]] = {}
    texts = [(f"extra_hint({e!r})", extra_hint(e)) for e in EXTRAS]
    texts += [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in SOURCES if p.is_file()]
    for where, text in texts:
        for match in HINT.finditer(text):
            spec = match.group(2).strip("'\"")
            if spec.startswith(
                "$"
            ):  # a requirement a script builds (the Action's install step: tested there)
                continue
            found.setdefault(spec, set()).add(where)
    return found


def ours(spec: str) -> bool:
    return spec.startswith(("imagelint", ".", "/"))


def test_the_code_words_its_hints_through_extra_hint_only() -> None:
    """No other module spells an install command: a new hint is then one these tests run."""
    spelled = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "imagelint").rglob("*.py"))
        if "pip install" in p.read_text(encoding="utf-8")
    ]
    assert spelled == ["imagelint/errors.py"]


def test_every_hint_is_a_path_or_the_repository() -> None:
    found = hints()
    assert any(spec.startswith(".") for spec in found) and any(GIT.match(spec) for spec in found)
    index_forms = {spec: sorted(where) for spec, where in found.items() if ours(spec)}
    index_forms = {
        spec: where for spec, where in index_forms.items() if not spec.startswith(".") and not GIT.match(spec)
    }
    assert index_forms == {}, "no package index serves imagelint: install from a clone or the repository"
    for spec in filter(ours, found):
        named = re.search(r"\[([\w,-]+)\]", spec)
        assert named is None or set(named.group(1).split(",")) <= set(EXTRAS), spec


def _pip_would_install(requirement: str, cwd: Path) -> dict[str, object]:
    report = cwd.parent / "pip-report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
         "--quiet", "--disable-pip-version-check", "--report", str(report), requirement],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (requirement, proc.stderr[-3000:])
    (install,) = json.loads(report.read_text())["install"]
    return dict(install)


@pytest.mark.slow
def test_every_hint_installs_imagelint_with_its_extras(tmp_path: Path) -> None:
    clone = tmp_path / "imagelint"
    ignore = shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", "site", ".*_cache")
    shutil.copytree(REPO, clone, ignore=ignore, symlinks=True)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "release"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    for spec in sorted(filter(ours, hints())):
        requirement = spec.replace(REPOSITORY, clone.as_uri()).replace("${IMAGELINT_REF}", "v1")
        install = _pip_would_install(requirement, clone)
        metadata = install["metadata"]
        assert isinstance(metadata, dict) and metadata["name"] == "imagelint", spec
        named = re.search(r"\[([\w,-]+)\]", spec)
        assert sorted(install.get("requested_extras") or []) == sorted(
            named.group(1).split(",") if named else []
        )
