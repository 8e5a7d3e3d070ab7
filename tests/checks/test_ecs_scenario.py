"""The incident, offline: the sample image's ECS agent is caught by six rules, each saying why;
the combination (IL206) is critical."""

from __future__ import annotations

from pathlib import Path

import yaml

from imagelint.config import load_config
from imagelint.engine import RunSettings, audit
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.support import REPO, build_tree


def test_ecs_scenario_fires_six_rules_with_reasons(tmp_path: Path) -> None:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    root = build_tree(tmp_path / "sample", entries)
    config = load_config(REPO / "examples/sample.imagelint.yaml")
    report = audit(RootfsTarget(root), load_packs([], builtin=builtin_pack_paths()), config, RunSettings())
    ecs = {f.rule_id: f for f in report.findings if f.unit == "ecs.service"}
    assert set(ecs) == {"IL201", "IL202", "IL203", "IL204", "IL206", "IL501"}
    # the unbounded restart policy alone is a low risk; with the evidence it will fail, critical
    assert not ecs["IL202"].failing and ecs["IL202"].severity.value == "low"
    # the loop (IL206) carries the failure of the evidence it names; IL204 is a fault of its own
    assert {rule for rule, f in ecs.items() if f.failing} == {"IL204", "IL206"}
    assert {rule for rule, f in ecs.items() if f.part_of == "IL206"} == {"IL201", "IL203", "IL501"}
    il206 = ecs["IL206"]
    assert il206.severity.value == "critical"
    for evidence in (
        "started at boot (default.target → multi-user.target → ecs.service)",
        "/usr/libexec/amazon-ecs-init is missing",
        "/etc/ecs/ecs.config has no ECS_CLUSTER",
        "enabled but not expected",
        "RestartSec=10s: up to 8,640 restarts a day",
    ):
        assert evidence in il206.message, il206.message
    # IL501: enabled, and the config names no cluster
    assert "/etc/ecs/ecs.config sets no ECS_CLUSTER" in ecs["IL501"].message
    # IL201: the binary is not in the image, named with every setting that runs it
    assert "/usr/libexec/amazon-ecs-init is missing (ExecStartPre= line 12, ExecStart= line 13" in (
        ecs["IL201"].message
    )
    assert ecs["IL201"].line == 13
    # IL202: why the start limit never trips, and what it allows
    il202 = ecs["IL202"]
    assert (il202.path, il202.line) == ("/usr/lib/systemd/system/ecs.service", 9)
    assert il202.evidence["restarts_per_day"] == "8,640"
    assert "6 starts take at least 5×10s = 50s, not less than the 10s interval" in il202.message
    # IL203: who turned it on (not expected, no preset)
    assert "/etc/systemd/system/multi-user.target.wants/ecs.service" in ecs["IL203"].message
    assert "not expected" in ecs["IL203"].message
    # IL204: Requires= a unit that is not there
    assert "Requires=docker.service, but no unit file defines docker.service" in ecs["IL204"].message


def test_ecs_rule_quiet_when_a_cluster_is_configured(tmp_path: Path) -> None:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    entries["/etc/ecs/ecs.config"] = "ECS_CLUSTER=training\n"
    root = build_tree(tmp_path / "sample", entries)
    packs = load_packs([], builtin=builtin_pack_paths())
    from imagelint.config import Config
    from imagelint.report import Outcome

    report = audit(RootfsTarget(root), packs, Config(select=["IL501"]), RunSettings())
    [result] = [r for r in report.rules if r.rule_id == "IL501"]
    assert result.outcome is Outcome.PASS and result.findings == 0 and result.reason == ""
