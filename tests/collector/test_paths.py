"""Every built-in rule reads only what its check kind declares: on a bundle the collector made of a
tree, the rules find exactly what they find on the tree itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.config import Config
from tests.collector.support import PACKS, bundle_report, collect, directory_report, findings, outcomes
from tests.support import build_tree

EXAMPLES = [r for p in PACKS for r in p.rules if r.example is not None and "image" in r.scopes]


@pytest.mark.slow
@pytest.mark.parametrize("image", ["debian_rootfs", "cloud_rootfs", "sample_image"])
def test_every_builtin_rule_agrees_on_a_real_image(
    image: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    root: Path = request.getfixturevalue(image)
    bundle = collect(root, tmp_path / "w")
    direct, remote = directory_report(root), bundle_report(bundle)
    assert direct.findings, "the image has findings to agree on"
    assert findings(remote) == findings(direct)
    assert outcomes(remote) == outcomes(direct)
    assert remote.verdict == direct.verdict
    assert not remote.errors and remote.target["kind"] == "bundle"


@pytest.mark.parametrize("rule", EXAMPLES, ids=lambda r: f"{r.id}-{r.name}")
def test_each_rule_fires_on_the_bundle_of_its_example(rule, tmp_path: Path) -> None:
    """Only this rule is loaded, so the plan holds only what its kind (and conditions) declare."""
    root = build_tree(tmp_path / "image", rule.example)
    config = Config(select=[rule.id])
    direct = directory_report(root, config)
    remote = bundle_report(collect(root, tmp_path / "w", config=config), config)
    assert direct.findings
    assert findings(remote) == findings(direct)
    assert outcomes(remote)[rule.id] == outcomes(direct)[rule.id] == "fail"
