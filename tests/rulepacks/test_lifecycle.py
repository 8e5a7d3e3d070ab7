"""Rule lifecycle: ids are forever; renamed and replaced rules keep old selectors and waivers working,
preview rules run only when named, deprecated ones say what to use, removed ones never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import os_root, run_cli

PACK = """
pack: {name: lifecycle}
rules:
  - id: IL901
    name: old-marker
    since: 0.1.0
    status: removed
    replaced_by: IL902
    title: the marker (retired)
    severity: high
    scope: [image]
    check: {kind: file.present, paths: [/etc/marker]}
    message: "{path}"
    remediation: remove it
  - id: IL902
    name: marker-present
    since: 0.2.0
    renamed_from: [marker-file]
    replaces: [IL901]
    title: the marker
    severity: high
    scope: [image]
    check: {kind: file.present, paths: [/etc/marker]}
    message: "{path} is there"
    remediation: remove it
  - id: IL903
    name: preview-marker
    since: 0.2.0
    status: preview
    title: the marker, in preview
    severity: high
    scope: [image]
    check: {kind: file.present, paths: [/etc/marker]}
    message: "{path}"
    remediation: remove it
  - id: IL904
    name: deprecated-marker
    since: 0.1.0
    status: deprecated
    replaced_by: IL902
    title: the marker, deprecated
    severity: low
    scope: [image]
    check: {kind: file.present, paths: [/etc/marker]}
    message: "{path}"
    remediation: remove it
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    pack = tmp_path / "lifecycle.yaml"
    pack.write_text(PACK)
    return os_root(tmp_path / "image", {"/etc/marker": "x\n"}), pack


def _audit(setup: tuple[Path, Path], tmp_path: Path, *args: str, config: str = "") -> tuple[int, dict]:
    root, pack = setup
    cfg = tmp_path / "imagelint.yaml"
    cfg.write_text(config or "fail-on: high\n")
    out = tmp_path / "r.json"
    proc = run_cli(
        "audit", str(root), "--no-builtin-rules", "-r", str(pack), "-c", str(cfg), "-f", f"json:{out}", *args
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(out.read_text())


def _outcomes(report: dict) -> dict[str, str]:
    return {r["rule_id"]: r["outcome"] for r in report["rules"]}


def test_removed_rules_never_run_and_preview_rules_wait_to_be_named(setup, tmp_path: Path) -> None:
    code, report = _audit(setup, tmp_path)
    outcomes = _outcomes(report)
    assert code == 1 and outcomes["IL901"] == "skipped" and outcomes["IL903"] == "skipped"
    assert outcomes["IL902"] == "fail" and outcomes["IL904"] == "fail"
    reasons = {r["rule_id"]: r["reason"] for r in report["rules"]}
    assert "use IL902" in reasons["IL901"] and "preview" in reasons["IL903"]
    assert any(
        "IL904 (deprecated-marker) is deprecated; use IL902" in w["message"] for w in report["warnings"]
    )


def test_selecting_a_removed_id_or_an_old_name_runs_its_successor(setup, tmp_path: Path) -> None:
    for selector in ("IL901", "marker-file"):
        _, report = _audit(setup, tmp_path, "--select", selector)
        ran = {rid for rid, o in _outcomes(report).items() if o not in ("skipped",)}
        assert ran == {"IL902"}, selector


def test_a_preview_rule_runs_when_selected_by_id(setup, tmp_path: Path) -> None:
    _, report = _audit(setup, tmp_path, "--select", "IL903")
    assert _outcomes(report)["IL903"] == "fail"
    _, report = _audit(setup, tmp_path, "--select", "IL90*")  # a glob does not name it
    assert _outcomes(report)["IL903"] == "skipped"


def test_a_waiver_on_the_removed_id_still_waives_the_successor(setup, tmp_path: Path) -> None:
    config = (
        "fail-on: high\nignore: [IL904]\nwaivers:\n"
        "  - {rule: IL901, reason: tracked in JIRA-1, expires: 2999-01-01}\n"
    )
    code, report = _audit(setup, tmp_path, config=config)
    assert code == 0 and _outcomes(report)["IL902"] == "waived"
