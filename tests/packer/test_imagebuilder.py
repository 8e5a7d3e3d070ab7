"""The EC2 Image Builder test component: valid AWSTOE structure, S3 steps that move the collector in
and the bundle out, and a collect step that runs for real and gives a bundle `imagelint audit` judges."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import yaml

from tests.packer.helpers import PACKER_DIR, VENV_BIN

COMPONENT = PACKER_DIR / "imagebuilder" / "imagelint-test-component.yaml"
SCHEMA = Path(__file__).resolve().parent / "awstoe-component.schema.json"


def _doc() -> dict:
    return yaml.safe_load(COMPONENT.read_text(encoding="utf-8"))


def test_component_matches_the_awstoe_document_structure():
    jsonschema.validate(_doc(), json.loads(SCHEMA.read_text()))


def test_schema_rejects_what_awstoe_rejects():
    doc = _doc()
    bad_phase = {**doc, "phases": [{"name": "deploy", "steps": doc["phases"][0]["steps"]}]}
    bad_step = {
        **doc,
        "phases": [{"name": "test", "steps": [{"name": "x", "action": "ExecuteBash", "inputs": {}}]}],
    }
    schema = json.loads(SCHEMA.read_text())
    for bad in (bad_phase, bad_step, {k: v for k, v in doc.items() if k != "schemaVersion"}):
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


def test_only_a_test_phase_whose_steps_abort_on_failure_and_run_no_python():
    doc = _doc()
    assert [p["name"] for p in doc["phases"]] == ["test"]
    steps = doc["phases"][0]["steps"]
    assert [(s["name"], s["action"]) for s in steps] == [
        ("DownloadCollector", "S3Download"),
        ("CollectBundle", "ExecuteBash"),
        ("UploadBundle", "S3Upload"),
        ("RemoveCollector", "ExecuteBash"),
    ]
    gates = [s for s in steps if s["name"] != "RemoveCollector"]
    assert all(s.get("onFailure", "Abort") == "Abort" for s in gates)
    text = COMPONENT.read_text(encoding="utf-8")
    commands = [c for s in steps if s["action"] == "ExecuteBash" for c in s["inputs"]["commands"]]
    assert not any(re.search(r"python|pip|venv|imagelint audit", c) for c in commands)
    assert "imagelint collector" in text and "imagelint audit BUNDLE" in text  # said where it is judged


def test_s3_steps_move_the_collector_in_and_the_bundle_out_with_the_parameters():
    doc = _doc()
    params = {name for p in doc["parameters"] for name in p}
    assert params == {"CollectorS3Uri", "BundleS3Uri"}
    steps = {s["name"]: s for s in doc["phases"][0]["steps"]}
    downloads = steps["DownloadCollector"]["inputs"]
    assert [(d["source"], d["destination"]) for d in downloads] == [
        ("{{ CollectorS3Uri }}/collect.sh", "/var/tmp/imagelint-test/collect.sh"),
        ("{{ CollectorS3Uri }}/plan.txt", "/var/tmp/imagelint-test/plan.txt"),
    ]
    (upload,) = steps["UploadBundle"]["inputs"]
    assert upload == {"source": "/var/tmp/imagelint-test/bundle", "destination": "{{ BundleS3Uri }}"}
    # every {{ reference }} names a declared parameter
    for reference in re.findall(r"\{\{\s*(\w+)\s*\}\}", COMPONENT.read_text(encoding="utf-8")):
        assert reference in params


def test_the_collect_step_runs_with_bash_and_the_bundle_is_judged_by_imagelint_audit(
    tmp_path: Path, sample_image: Path
) -> None:
    """The CollectBundle commands run for real (bash, as AWSTOE's ExecuteBash), on the collector
    `imagelint collector` wrote, standing in for the S3 download; the instance's paths are moved under
    tmp_path and the collector reads the sample tree (its plan's ``root``), not this machine."""
    exe = str(VENV_BIN / "imagelint")
    config = PACKER_DIR / "provisioner" / "imagelint.yaml"
    instance = tmp_path / "var-tmp-imagelint-test"
    subprocess.run(
        [exe, "collector", str(instance), "--config", str(config)], check=True, capture_output=True
    )
    with (instance / "plan.txt").open("a", encoding="utf-8") as plan:
        plan.write(f"root {sample_image}\nshow 0\n")
    steps = {s["name"]: s for s in _doc()["phases"][0]["steps"]}
    script = "\n".join(steps["CollectBundle"]["inputs"]["commands"]).replace(
        "/var/tmp/imagelint-test", str(instance)
    )
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    report = tmp_path / "report.json"
    audit = subprocess.run(
        [exe, "audit", str(instance / "bundle"), "--config", str(config), "-f", f"json:{report}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert audit.returncode == 1, audit.stderr
    failing = {f["rule_id"] for f in json.loads(report.read_text())["findings"] if f["failing"]}
    assert {"IL206", "IL108"} <= failing  # the ecs loop (IL203 is part of it), the cloud-init leftover
