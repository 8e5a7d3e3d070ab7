"""The EC2 Image Builder test component: valid AWSTOE structure, and the commands the gate depends on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import yaml

from tests.packer.helpers import PACKER_DIR

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


def test_only_a_test_phase_with_execute_bash_steps_that_abort_on_failure():
    doc = _doc()
    assert [p["name"] for p in doc["phases"]] == ["test"]
    steps = doc["phases"][0]["steps"]
    assert all(s["action"] == "ExecuteBash" for s in steps)
    gates = [s for s in steps if s["name"] != "RemoveImagelint"]
    assert all(s.get("onFailure", "Abort") == "Abort" for s in gates)


def test_commands_install_audit_and_soak_with_the_parameters():
    doc = _doc()
    params = {name for p in doc["parameters"] for name in p}
    assert params == {"ImagelintVersion", "FailOn", "SoakDuration"}
    commands = {s["name"]: s["inputs"]["commands"] for s in doc["phases"][0]["steps"]}
    assert commands["InstallImagelint"][0] == "set -eu"
    assert any('"imagelint=={{ ImagelintVersion }}"' in c for c in commands["InstallImagelint"])
    (audit,) = commands["AuditImage"]
    assert re.search(r"imagelint audit / --live --fail-on \"\{\{ FailOn \}\}\"", audit)
    (soak,) = commands["SoakImage"]
    assert 'imagelint soak --duration "{{ SoakDuration }}" --fail-on "{{ FailOn }}"' in soak
    # every {{ reference }} names a declared parameter, and is inside a YAML string (AWSTOE's rule)
    for cmds in commands.values():
        for command in cmds:
            assert set(re.findall(r"\{\{\s*(\w+)\s*\}\}", command)) <= params
    # the exit code decides: nothing swallows it
    assert not any("|| true" in c or "; exit 0" in c for cmds in commands.values() for c in cmds)
