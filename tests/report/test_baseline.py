"""audit --baseline / --fail-on-new on the sample image: the backlog passes, one new fault fails
alone and is marked new, a fixed fault is listed absent; JSON and SARIF carry the states and stay
valid against the published report schema and the official SARIF 2.1.0 schema."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from imagelint.report.verdict import finding_fails
from imagelint.rulepacks import Severity
from tests.formats.ci_helpers import SAMPLE_CONFIG, SARIF_SCHEMA, sample_image
from tests.support import run_cli

CREDENTIALS = (
    "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
)


def _schema() -> dict:
    proc = run_cli("schema", "report")
    assert proc.returncode == 0
    return json.loads(proc.stdout)


def _audit(image: Path, out: Path, *extra: str) -> tuple[int, dict]:
    proc = run_cli("audit", str(image), "-c", str(SAMPLE_CONFIG), "-f", f"json:{out}", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, _schema())
    return proc.returncode, report


@pytest.fixture()
def baseline(tmp_path: Path) -> tuple[Path, Path]:
    image = sample_image(tmp_path / "image")
    code, report = _audit(image, tmp_path / "old.json")
    assert code == 1 and report["counts"]["failing"] > 5  # the sample's backlog fails on its own
    return image, tmp_path / "old.json"


def test_the_sample_against_its_own_report_passes_with_fail_on_new(baseline: tuple[Path, Path]) -> None:
    image, old = baseline
    code, report = _audit(image, old.parent / "new.json", "--baseline", str(old), "--fail-on-new")
    assert code == 0 and report["verdict"] == "pass"
    assert {f["baseline_state"] for f in report["findings"]} == {"unchanged"}
    assert report["absent_findings"] == [] and report["baseline"]["new"] == 0
    # without --fail-on-new the same backlog still fails: the baseline only marks
    code, report = _audit(image, old.parent / "new.json", "--baseline", str(old))
    assert code == 1 and report["baseline"]["fail_on_new"] is False


def test_one_added_fault_fails_alone_marked_new(baseline: tuple[Path, Path]) -> None:
    image, old = baseline
    (image / "home/ubuntu/.aws").mkdir(parents=True)
    (image / "home/ubuntu/.aws/credentials").write_text(CREDENTIALS)
    code, report = _audit(image, old.parent / "new.json", "--baseline", str(old), "--fail-on-new")
    assert code == 1 and report["verdict"] == "fail"
    new = [f for f in report["findings"] if f["baseline_state"] == "new"]
    assert [(f["rule_id"], f["subject"]) for f in new] == [("IL107", "/home/ubuntu/.aws/credentials")]
    assert [f for f in report["findings"] if f["failing"]] == new
    assert report["baseline"] == {**report["baseline"], "new": 1, "absent": 0}


def test_a_fixed_fault_is_listed_absent_and_sarif_carries_baseline_state(
    baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    image, old = baseline
    (image / "root/.aws/credentials").unlink()
    (image / "home/ubuntu/.aws").mkdir(parents=True)
    (image / "home/ubuntu/.aws/credentials").write_text(CREDENTIALS)
    sarif_path = tmp_path / "new.sarif"
    code, report = _audit(
        image, tmp_path / "new.json", "--baseline", str(old), "--fail-on-new", "-f", f"sarif:{sarif_path}"
    )
    assert code == 1  # the new credentials file
    absent = [(f["rule_id"], f["subject"], f["baseline_state"]) for f in report["absent_findings"]]
    assert absent == [("IL107", "/root/.aws/credentials", "absent")]
    sarif = json.loads(sarif_path.read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    results = sarif["runs"][0]["results"]
    states = {(r["ruleId"], r["properties"]["subject"]): r["baselineState"] for r in results}
    assert states[("IL107", "/home/ubuntu/.aws/credentials")] == "new"
    assert states[("IL107", "/root/.aws/credentials")] == "absent"
    assert set(states.values()) == {"new", "unchanged", "absent"}
    gone = next(r for r in results if r["baselineState"] == "absent")
    assert gone["level"] == "none" and gone["kind"] == "pass"
    # the same fingerprint in the report and in SARIF
    by_subject = {f["subject"]: f["fingerprint"] for f in report["findings"] if f["rule_id"] == "IL107"}
    sarif_fp = {
        r["properties"]["subject"]: r["partialFingerprints"]["primaryLocationLineHash"]
        for r in results
        if r["ruleId"] == "IL107"
    }
    assert by_subject["/home/ubuntu/.aws/credentials"] == sarif_fp["/home/ubuntu/.aws/credentials"]


def test_findings_are_matched_by_rule_and_subject_not_by_where_the_image_is(
    baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    image, old = baseline
    moved = tmp_path / "elsewhere" / "mnt"
    shutil.copytree(image, moved, symlinks=True)
    code, report = _audit(moved, tmp_path / "new.json", "--baseline", str(old), "--fail-on-new")
    assert code == 0 and report["baseline"]["unchanged"] == len(report["findings"])


def test_bad_baselines_are_refused(baseline: tuple[Path, Path], tmp_path: Path) -> None:
    image, _ = baseline
    proc = run_cli("audit", str(image), "--fail-on-new")
    assert proc.returncode == 2 and "--fail-on-new needs --baseline" in proc.stderr
    proc = run_cli("audit", str(image), "--baseline", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "nope.json: no such file" in proc.stderr, proc.stderr
    (tmp_path / "junk.json").write_text("[" * 100_000)
    proc = run_cli("audit", str(image), "--baseline", str(tmp_path / "junk.json"))
    assert proc.returncode == 3 and "not a JSON report" in proc.stderr
    (tmp_path / "other.json").write_text('{"findings": []}')
    proc = run_cli("audit", str(image), "--baseline", str(tmp_path / "other.json"))
    assert proc.returncode == 3 and "not an imagelint report" in proc.stderr


def test_the_verdict_function_decides_fail_on_new() -> None:
    high, medium = Severity.HIGH, Severity.MEDIUM
    assert finding_fails(high, medium, baseline_state="new", new_only=True)
    assert not finding_fails(high, medium, baseline_state="unchanged", new_only=True)
    assert finding_fails(high, medium, baseline_state="unchanged")  # marking alone changes nothing
    assert finding_fails(Severity.LOW, medium, ["always-fail"], baseline_state="unchanged", new_only=True)
    assert not finding_fails(Severity.LOW, medium, baseline_state="new", new_only=True)
    assert not finding_fails(high, medium, waived=True, baseline_state="new", new_only=True)
