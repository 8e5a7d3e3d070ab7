"""`imagelint units`: states and presets against `systemctl --root list-unit-files` on the real image,
the JSON against its schema, the text table, and bad usage."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from imagelint.commands.units import listing_of
from imagelint.formats.units_json import UNITS_SCHEMA, units_document
from imagelint.formats.units_table import render_text
from tests.facts.systemd.oracle import NO_PRESET_STATES, list_unit_files, systemctl_available
from tests.support import need, os_root, run_cli


def test_units_json_agrees_with_systemctl(debian_rootfs: Path) -> None:
    need(systemctl_available(), "systemctl is not installed")
    proc = run_cli("units", str(debian_rootfs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    jsonschema.validate(document, UNITS_SCHEMA)
    ours = {u["name"]: u for u in document["units"]}
    theirs = list_unit_files(debian_rootfs)
    assert len(theirs) > 150
    for name, (state, preset) in theirs.items():
        assert ours[name]["state"] == state, name
        if state not in NO_PRESET_STATES:
            assert ours[name]["preset"] == preset, name
    ssh = ours["ssh.service"]
    assert ssh["boot_chain"] == ["default.target", "graphical.target", "multi-user.target", "ssh.service"]
    assert ssh["fragment"] == "/lib/systemd/system/ssh.service" or ssh["fragment"].endswith("/ssh.service")
    assert document["default_target"] == "graphical.target"
    assert document["problems"] == []


def test_units_text_table(debian_rootfs: Path) -> None:
    proc = run_cli("units", str(debian_rootfs))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout  # no colour when not on a terminal
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("cron.service "))
    assert (
        "enabled" in line and "default.target → graphical.target → multi-user.target → cron.service" in line
    )
    coloured = render_text(units_document(listing_of(str(debian_rootfs))), terminal=True)
    assert "\x1b[" in coloured


def test_units_reports_problems_and_bad_usage(tmp_path: Path) -> None:
    from tests.facts.systemd.crafted import VENDOR, write

    os_root(tmp_path)
    write(tmp_path, f"{VENDOR}/garbage.service", b"\xff\xfe[Service\x00\n")
    proc = run_cli("units", str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    problems = json.loads(proc.stdout)["problems"]
    assert any(p["path"] == f"/{VENDOR}/garbage.service" for p in problems)
    text = run_cli("units", str(tmp_path))
    assert "problem /usr/lib/systemd/system/garbage.service" in text.stdout
    bad = run_cli("units", str(tmp_path / "nope"))
    assert bad.returncode == 3 and "does not exist" in bad.stderr and "Traceback" not in bad.stderr
    fmt = run_cli("units", str(tmp_path), "--format", "yaml")
    assert fmt.returncode == 2
    schema = run_cli("schema", "units")
    assert json.loads(schema.stdout) == UNITS_SCHEMA


def test_units_writes_every_format_it_is_given_like_audit(tmp_path: Path) -> None:
    from tests.facts.systemd.crafted import VENDOR, write

    write(os_root(tmp_path / "image"), f"{VENDOR}/a.service", "[Service]\nExecStart=/bin/true\n")
    out = tmp_path / "out" / "units.json"
    out.parent.mkdir()  # a missing directory is refused (tests/formats/test_outputs.py), never created
    proc = run_cli("units", str(tmp_path / "image"), "-f", "text", "-f", f"json:{out}")
    assert proc.returncode == 0, proc.stderr
    assumed = "default.target → multi-user.target, assumed: the image has no default.target"
    assert proc.stdout.splitlines()[0] == f"{tmp_path / 'image'}: 1 units, 0 started at boot ({assumed})"
    jsonschema.validate(json.loads(out.read_text()), UNITS_SCHEMA)
    assert [u["name"] for u in json.loads(out.read_text())["units"]] == ["a.service"]
    two = run_cli("units", str(tmp_path / "image"), "-f", "text", "-f", "json")
    assert two.returncode == 2 and "only one --format can go to stdout" in two.stderr
    sarif = run_cli("units", str(tmp_path / "image"), "-f", "sarif")
    assert sarif.returncode == 2
    assert "format 'sarif' cannot write a units listing (formats that can: text, json)" in sarif.stderr
