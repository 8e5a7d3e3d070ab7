"""The config's diff: section, and the diff gate's one decision (imagelint/diff/verdict.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from imagelint.config import config_schema, load_config
from imagelint.diff.policy import KINDS, DiffPolicy
from imagelint.diff.verdict import change_action, decide_diff
from imagelint.report.model import Verdict
from tests.support import os_root, run_cli


def test_actions_follow_the_config_and_the_allow_list() -> None:
    policy = DiffPolicy.from_config(
        {"restart-policy": "fail", "packages": "ignore", "allow-units": ["node-*"]}
    )
    assert change_action("restart-policy", policy, "a.service") == "fail"
    assert change_action("packages", policy) == "ignore"
    assert change_action("new-boot-units", policy, "node-exporter.service") == "allowed"
    assert change_action("new-boot-units", policy, "ecs.service") == "fail"  # the default
    assert change_action("enablement", policy, "node-exporter.service") == "warn"  # only appearing is allowed
    assert change_action("new-findings", policy, failing=False) == "warn"  # below fail-on: a warning
    assert change_action("new-findings", policy, failing=True) == "fail"
    assert DiffPolicy().actions == {k: d for k, (_, d) in KINDS.items()}


def test_the_verdict_fails_first_then_is_inconclusive_on_an_incomplete_side() -> None:
    assert decide_diff(["warn", "fail"], complete=False) is Verdict.FAIL
    assert decide_diff(["warn", "allowed"], complete=False) is Verdict.INCONCLUSIVE
    assert decide_diff(["warn"], complete=True) is Verdict.PASS


def test_a_bad_diff_section_is_refused_with_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("version: 1\ndiff:\n  new-boot-units: explode\n")
    old = os_root(tmp_path / "old", {"/etc/os-release": "ID=x\n"})
    proc = run_cli("diff", str(old), str(old), "-c", str(config))
    assert proc.returncode == 2 and f"{config}:3" in proc.stderr, proc.stderr
    config.write_text("version: 1\ndiff:\n  new-boot-unit: fail\n")  # a typo of a kind
    proc = run_cli("diff", str(old), str(old), "-c", str(config))
    assert proc.returncode == 2 and "new-boot-unit" in proc.stderr
    config.write_text("version: 1\ndiff:\n  restart-policy: fail\n  allow-units: [a.service]\n")
    assert load_config(config).diff.actions["restart-policy"] == "fail"
    published = json.loads(run_cli("schema", "config").stdout)
    assert published == config_schema()
    jsonschema.validate({"diff": {"new-boot-units": "warn", "allow-units": ["x"]}}, published)


def test_a_report_without_an_inventory_cannot_be_diffed(tmp_path: Path) -> None:
    root = os_root(tmp_path / "img", {"/etc/os-release": "ID=x\n"})
    out = tmp_path / "r.json"
    assert run_cli("audit", str(root), "-f", f"json:{out}").returncode in (0, 1)
    data = json.loads(out.read_text())
    data["inventory"] = None  # as a report of an older imagelint, or a soak's
    out.write_text(json.dumps(data))
    proc = run_cli("diff", str(out), str(root))
    assert proc.returncode == 3 and "the report has no inventory" in proc.stderr
