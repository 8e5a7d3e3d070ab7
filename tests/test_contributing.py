"""CONTRIBUTING.md's walk-through works as written: its check kind registers and its rule fires on its
example and stays quiet on its negative example."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from imagelint.checks import registry, unregister
from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.report import Outcome
from imagelint.rulepacks import load_packs
from imagelint.targets import RootfsTarget
from tests.support import REPO, build_tree

GUIDE = (REPO / "CONTRIBUTING.md").read_text()


def _block(language: str, after: str) -> str:
    start = GUIDE.index(after)
    match = re.search(rf"```{language}\n(.*?)```", GUIDE[start:], re.S)
    assert match, f"no {language} block after {after!r}"
    return textwrap.dedent(match.group(1))


def test_the_guide_s_check_kind_and_rule_work(tmp_path: Path) -> None:
    registry()
    namespace: dict[str, object] = {"__name__": "imagelint.checks.guide_example"}
    exec(compile(_block("python", "## How to add a check kind"), "CONTRIBUTING.md", "exec"), namespace)
    try:
        assert "file.hostname_set" in registry()
        pack = tmp_path / "guide.yaml"
        pack.write_text("rules:\n" + _block("yaml", "## How to add a rule"))
        [loaded] = load_packs([pack])
        [rule] = loaded.rules
        for tree, expected in ((rule.example, Outcome.FAIL), (rule.negative_example, Outcome.PASS)):
            root = build_tree(tmp_path / expected.value, tree or {})
            report = audit(RootfsTarget(root), [loaded], Config(), RunSettings())
            assert [r.outcome for r in report.rules] == [expected]
    finally:
        unregister("file.hostname_set")
