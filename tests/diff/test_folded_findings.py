"""Folding never changes a verdict, the diff's included: a new failing finding on a unit whose
combining finding (IL206) was already failing fails ``imagelint diff``, as it fails alone."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support import REPO, os_root, run_cli

CONFIG = str(REPO / "examples/sample.imagelint.yaml")


def _sample(root: Path, *, binary: bool) -> Path:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    if binary:
        entries["/usr/libexec/amazon-ecs-init"] = {"content": "#!/bin/sh\n", "mode": "0755"}
    return os_root(root, entries)


def _audit(root: Path) -> dict:
    proc = run_cli("audit", str(root), "-c", CONFIG, "-f", "json")
    return json.loads(proc.stdout)


def test_a_new_failing_finding_folded_into_an_already_failing_one_fails_the_diff(tmp_path: Path) -> None:
    old = _sample(tmp_path / "old", binary=True)
    new = _sample(tmp_path / "new", binary=False)
    old_ecs = {f["rule_id"] for f in _audit(old)["findings"] if f.get("unit") == "ecs.service"}
    new_findings = [f for f in _audit(new)["findings"] if f.get("unit") == "ecs.service"]
    assert "IL206" in old_ecs and "IL201" not in old_ecs  # the loop was failing already
    (il201,) = [f for f in new_findings if f["rule_id"] == "IL201"]
    assert il201["part_of"] == "IL206" and not il201["failing"]  # folded in NEW's own report
    proc = run_cli("diff", str(old), str(new), "-c", CONFIG, "-f", "json")
    result = json.loads(proc.stdout)
    added = [c for c in result["changes"] if c["kind"] == "new-findings" and c["subject"].startswith("IL201")]
    assert proc.returncode == 1 and result["verdict"] == "fail", (proc.returncode, proc.stderr)
    assert [c["action"] for c in added] == ["fail"]


def test_a_resolved_finding_is_a_note_not_a_warning(tmp_path: Path) -> None:
    old = _sample(tmp_path / "old", binary=False)
    new = _sample(tmp_path / "new", binary=True)  # the agent is installed: IL201 is resolved
    proc = run_cli("diff", str(old), str(new), "-c", CONFIG, "-f", "text", "-f", f"json:{tmp_path}/d.json")
    result = json.loads((tmp_path / "d.json").read_text())
    resolved = [c for c in result["changes"] if c["kind"] == "resolved-findings"]
    assert resolved and {c["action"] for c in resolved} == {"note"}
    warned = [c for c in result["changes"] if c["action"] == "warn"]
    counts = result["counts"]
    assert counts["note"] == len(resolved) and counts["warn"] == len(warned), counts
    assert all(c["kind"] != "resolved-findings" for c in warned)
    lines = [line for line in proc.stdout.splitlines() if line.split()[1:2] == ["resolved-findings"]]
    assert lines and all(line.startswith("NOTE ") for line in lines), lines
    assert (
        f"{len(warned)} warn, 0 allowed, {len(resolved)} note(s) (" in proc.stdout.rstrip().splitlines()[-1]
    )
