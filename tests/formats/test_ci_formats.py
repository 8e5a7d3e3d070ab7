"""SARIF, JUnit, GitHub annotations and Markdown, read back by the consumers that read them in CI.

The oracles: the official SARIF 2.1.0 JSON Schema (with the draft its ``$schema`` names), junitparser
for JUnit XML, the runner's own parsing rules for workflow commands and ``$GITHUB_OUTPUT``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from imagelint.formats.github import Annotation, escape_data, escape_property
from tests.formats.ci_helpers import (
    SAMPLE_CONFIG,
    SARIF_SCHEMA,
    parse_commands,
    parse_output_file,
    sample_image,
)
from tests.support import os_root, run_cli


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SARIF_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    assert cls.META_SCHEMA["$schema"].rstrip("#") == schema["$schema"].rstrip("#")  # the draft it names
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A repository checkout: the config and a Packer template the SARIF results can point at."""
    root = tmp_path / "repo"
    (root / "packer").mkdir(parents=True)
    shutil.copy(SAMPLE_CONFIG, root / ".imagelint.yaml")
    (root / "packer/image.pkr.hcl").write_text('source "null" "img" {}\n')
    return root


def _audit_sarif(image: Path, repo: Path, *extra: str) -> tuple[int, dict]:
    out = repo / "out.sarif"
    proc = run_cli("audit", str(image), "-f", f"sarif:{out}", *extra, cwd=repo, env={"GITHUB_WORKSPACE": ""})
    assert proc.returncode in (0, 1, 3), proc.stderr
    return proc.returncode, json.loads(out.read_text())


def test_sarif_is_valid_and_maps_rules_results_and_waivers(
    tmp_path: Path, repo: Path, sarif_validator: jsonschema.protocols.Validator
) -> None:
    image = sample_image(tmp_path / "image")
    code, sarif = _audit_sarif(image, repo, "--sarif-anchor", "packer/image.pkr.hcl")
    sarif_validator.validate(sarif)
    assert code == 1 and sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    by_id = {r["id"]: r for r in rules}
    # every evaluated rule is described; rules out of this run's scope (soak) are not
    assert {"IL101", "IL106", "IL107", "IL108", "IL114"} <= set(by_id)
    assert not any(r["id"].startswith("IL4") for r in rules)
    il107 = by_id["IL107"]
    assert il107["properties"]["security-severity"] == "9.5" and "security" in il107["properties"]["tags"]
    assert il107["defaultConfiguration"]["level"] == "error"
    assert "Remediation: Remove the file, rotate the key" in il107["help"]["text"]
    assert il107["shortDescription"]["text"] == "AWS credentials stored in the image"
    assert by_id["IL106"]["defaultConfiguration"]["level"] == "warning"  # low in this config, fail-on medium

    results = run["results"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]
        assert location["physicalLocation"]["artifactLocation"] == {
            "uri": "packer/image.pkr.hcl",
            "uriBaseId": "%SRCROOT%",
        }
        image_path = location["logicalLocations"][0]["fullyQualifiedName"]
        assert image_path.startswith("/") and image_path in result["message"]["text"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    levels = {(r["ruleId"], r["level"]) for r in results if "suppressions" not in r}
    assert ("IL107", "error") in levels and ("IL106", "warning") in levels
    suppressed = [r for r in results if "suppressions" in r]
    assert {r["ruleId"] for r in suppressed} == {"IL108"} and len(suppressed) == 2
    assert suppressed[0]["suppressions"][0]["kind"] == "external"
    assert suppressed[0]["suppressions"][0]["justification"] == (
        "cloud-init clean runs in the AMI-finalize step after this audit"
    )
    assert "<redacted>" in json.dumps(results) and "wJalrXUtnFEMI" not in json.dumps(sarif)
    invocation = run["invocations"][0]
    assert invocation["exitCode"] == 1 and invocation["executionSuccessful"] is True


def test_sarif_fingerprints_are_stable_across_images_and_distinct(tmp_path: Path, repo: Path) -> None:
    first = _audit_sarif(sample_image(tmp_path / "build-1"), repo)[1]
    second = _audit_sarif(sample_image(tmp_path / "elsewhere" / "build-2"), repo)[1]

    def prints(sarif: dict) -> dict[tuple[str, str], str]:
        return {
            (r["ruleId"], r["properties"]["subject"]): r["partialFingerprints"]["primaryLocationLineHash"]
            for r in sarif["runs"][0]["results"]
        }

    findings = 15  # 13 active and 2 waived findings on the sample image with its config
    assert prints(first) == prints(second) and len(prints(first)) == findings
    assert len(set(prints(first).values())) == findings  # one alert per finding


def test_sarif_anchor_defaults_to_the_config_then_to_none(
    tmp_path: Path, repo: Path, sarif_validator: jsonschema.protocols.Validator
) -> None:
    image = sample_image(tmp_path / "image")
    _, with_config = _audit_sarif(image, repo)  # .imagelint.yaml is found in the working directory
    sarif_validator.validate(with_config)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in with_config["runs"][0]["results"]
    }
    assert uris == {".imagelint.yaml"}

    sub = repo / "build"  # run from a subdirectory: the URI stays relative to the workspace
    sub.mkdir()
    out = sub / "x.sarif"
    env = {"GITHUB_WORKSPACE": str(repo)}
    proc = run_cli(
        "audit",
        str(image),
        "-c",
        "../.imagelint.yaml",
        "--sarif-anchor",
        "../packer/image.pkr.hcl",
        "-f",
        f"sarif:{out}",
        cwd=sub,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    anchored = json.loads(out.read_text())["runs"][0]
    assert {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in anchored["results"]
    } == {"packer/image.pkr.hcl"}
    assert anchored["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"

    bare = tmp_path / "no-config"
    bare.mkdir()
    _, without = _audit_sarif(image, bare)
    sarif_validator.validate(without)
    for result in without["runs"][0]["results"]:
        assert "physicalLocation" not in result["locations"][0]
        assert result["locations"][0]["logicalLocations"][0]["kind"] == "resource"


def test_sarif_inconclusive_run_reports_notifications(
    tmp_path: Path, repo: Path, sarif_validator: jsonschema.protocols.Validator
) -> None:
    image = os_root(tmp_path / "image", {})
    os.mkfifo(image / "etc/machine-id")
    code, sarif = _audit_sarif(image, repo, "--select", "IL102")
    sarif_validator.validate(sarif)
    invocation = sarif["runs"][0]["invocations"][0]
    assert code == 3 and invocation["exitCode"] == 3 and invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and note["associatedRule"] == {"id": "IL102"}
    assert "is a FIFO" in note["message"]["text"]


def test_junit_is_read_back_by_junitparser(tmp_path: Path) -> None:
    image = sample_image(tmp_path / "image")
    out = tmp_path / "junit.xml"
    proc = run_cli("audit", str(image), "-c", str(SAMPLE_CONFIG), "-f", f"junit:{out}")
    assert proc.returncode == 1, proc.stderr
    xml = JUnitXml.fromfile(str(out))
    [suite] = list(xml)
    cases = {case.name.split()[0]: case for case in suite}
    outcome = {rid: [type(r) for r in case.result] for rid, case in cases.items()}
    hygiene = {"IL101", "IL102", "IL104", "IL107", "IL109", "IL110"}
    ecs = {"IL204", "IL206"}  # the incident's unit: the loop (IL201, IL203, IL501 are part of it) and IL204
    assert {rid for rid, kinds in outcome.items() if Failure in kinds} == hygiene | ecs
    assert outcome["IL202"] == []  # the unbounded restart policy alone is low: below fail-on
    assert all(outcome[r] == [] for r in ("IL201", "IL203", "IL501"))  # part of IL206, not failures
    assert outcome["IL106"] == [] and "/root/.bash_history" in cases["IL106"].system_out  # below fail-on
    assert outcome["IL108"] == [Skipped] and cases["IL108"].result[0].message.startswith("waived: cloud-init")
    assert outcome["IL114"] == [Skipped] and "not applicable" in cases["IL114"].result[0].message
    assert all(outcome[r] == [Skipped] for r in cases if r.startswith("IL4"))  # soak scope: not run
    assert cases["IL107"].classname == "imagelint.hygiene"
    failure = cases["IL107"].result[0]
    assert failure.type == "critical" and "Remediation:" in failure.text and "wJalr" not in failure.text
    assert (suite.tests, suite.failures, suite.errors) == (len(cases), len(hygiene | ecs), 0)
    assert suite.skipped == sum(1 for kinds in outcome.values() if Skipped in kinds)


def test_junit_reports_unreadable_data_as_error(tmp_path: Path) -> None:
    image = os_root(tmp_path / "image", {})
    os.mkfifo(image / "etc/machine-id")
    (image / "etc/bad\x01name").write_text("x")  # a control character XML 1.0 cannot carry
    out = tmp_path / "junit.xml"
    proc = run_cli("audit", str(image), "--select", "IL102", "-f", f"junit:{out}", timeout=30)
    assert proc.returncode == 3
    [suite] = list(JUnitXml.fromfile(str(out)))
    [case] = [c for c in suite if c.name.startswith("IL102")]
    assert [type(r) for r in case.result] == [Error] and "FIFO" in case.result[0].message
    assert suite.errors == 1


def test_workflow_command_escaping_matches_the_toolkit() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = Annotation("error", "50% of 2:\nlines", title="IL1, x: y", file="p,q:r.hcl", line=1).command()
    assert line == "::error file=p%2Cq%3Ar.hcl,line=1,title=IL1%2C x%3A y::50%25 of 2:%0Alines"
    [parsed] = parse_commands(line)
    assert parsed == {
        "kind": "error",
        "file": "p,q:r.hcl",
        "line": "1",
        "title": "IL1, x: y",
        "message": "50% of 2:\nlines",
    }


def test_annotations_respect_the_display_limit_most_severe_first(tmp_path: Path) -> None:
    entries: dict[str, object] = {
        f"/etc/app/conf{i:02}": {"content": "x\n", "mode": "0666"} for i in range(12)
    }
    entries |= {f"/home/u{i:02}/.bash_history": "ls\n" for i in range(12)}
    image = os_root(tmp_path / "image", entries)
    anchor = tmp_path / "odd, name: v1.pkr.hcl"
    anchor.write_text("")
    proc = run_cli(
        "audit",
        str(image),
        "--select",
        "IL109,IL106",
        "--fail-on",
        "high",
        "-f",
        "github",
        "--sarif-anchor",
        anchor.name,
        cwd=tmp_path,
        env={"GITHUB_WORKSPACE": ""},
    )
    assert proc.returncode == 1, proc.stderr
    commands = parse_commands(proc.stdout)
    assert [c["kind"] for c in commands] == ["error"] * 10 + ["warning"] * 10 + ["notice"]
    assert all(c["title"].startswith("IL109") for c in commands[:10])
    assert all(c["title"].startswith("IL106") and c["file"] == anchor.name for c in commands[10:20])
    assert "2 error(s), 2 warning(s) not annotated" in commands[-1]["message"]
    assert len(proc.stdout.splitlines()) == 21  # nothing but commands, one per line


def test_github_mode_defaults_and_opt_out(tmp_path: Path) -> None:
    image = sample_image(tmp_path / "image")
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)}
    proc = run_cli("audit", str(image), "-c", str(SAMPLE_CONFIG), env=env)
    assert proc.returncode == 1
    assert "FAIL:" in proc.stdout  # the text table for the log ...
    errors = [c for c in parse_commands(proc.stdout) if c["kind"] == "error"]
    assert len(errors) == 8  # ... and annotations: one per failing finding (8, under GitHub's limit of 10)
    assert parse_output_file(outputs)["verdict"] == "fail" and "## imagelint: ❌ FAIL" in summary.read_text()

    summary.unlink()
    outputs.unlink()
    proc = run_cli("audit", str(image), "-c", str(SAMPLE_CONFIG), "--no-github", env=env)
    assert proc.returncode == 1 and parse_commands(proc.stdout) == []
    assert not summary.exists() and not outputs.exists()

    proc = run_cli("audit", str(image), "--sarif-anchor", str(tmp_path / "missing.hcl"))
    assert proc.returncode == 2 and "--sarif-anchor" in proc.stderr


def test_step_summary_stays_under_one_mebibyte(tmp_path: Path) -> None:
    entries = {f"/etc/app/{'x' * 180}{i:03}": {"content": "x\n", "mode": "0666"} for i in range(100)}
    image = os_root(tmp_path / "image", entries)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step output\n" + "a" * (1024 * 1024 - 12_000))  # what this step wrote before
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(tmp_path / "o"),
    }
    proc = run_cli("audit", str(image), "--select", "IL109", env=env)
    assert proc.returncode == 1
    size = summary.stat().st_size
    text = summary.read_text()
    assert 1024 * 1024 - 12_000 < size < 1024 * 1024
    assert "## imagelint: ❌ FAIL" in text and "more finding(s) not shown here" in text
    shown = text.count("| 🔴 high |")
    assert 0 < shown < 100


def test_markdown_cells_cannot_break_the_table(tmp_path: Path) -> None:
    from markdown_it import MarkdownIt  # CommonMark with GFM tables, raw HTML allowed, as GitHub does

    image = os_root(tmp_path / "image", {"/etc/a|b<img src=x>": {"content": "x\n", "mode": "0666"}})
    proc = run_cli("audit", str(image), "--select", "IL109", "-f", "markdown")
    assert proc.returncode == 1
    rendered = MarkdownIt("commonmark").enable("table").render(proc.stdout)
    assert "<img" not in rendered  # the file name stayed text
    rows = [row for row in rendered.split("<tr>") if "/etc/a|b&lt;img src=x&gt;" in row]
    assert rows and all(row.count("<td") == 6 for row in rows)  # the | in the name split no cell


def test_annotations_hold_no_literal_escapes_from_the_rules_yaml(tmp_path: Path) -> None:
    """A rule's remediation written as a YAML block scalar ends in a newline: layout, which the
    annotation must not show as a literal ``\\n`` (for_log makes a newline visible)."""
    image = sample_image(tmp_path / "image")
    proc = run_cli("audit", str(image), "-f", "github", env={"GITHUB_WORKSPACE": ""})
    commands = parse_commands(proc.stdout)
    assert proc.returncode == 1 and len(commands) > 10
    assert any("Remediation: " in c["message"] for c in commands)
    for command in commands:
        for line in command["message"].split("\n"):
            assert "\\n" not in line and line == line.strip(), command


def test_markdown_writes_the_version_as_it_is(tmp_path: Path) -> None:
    """The version follows other text on its line, where no block construct can start: no
    character reference for its first digit (GitHub renders it, the raw file and PR APIs show it)."""
    from imagelint import __version__

    image = sample_image(tmp_path / "image")
    proc = run_cli("audit", str(image), "-f", "markdown")
    assert proc.returncode == 1
    assert f" · imagelint {__version__} · fail-on" in proc.stdout


def test_the_step_summary_shows_code_as_code_and_paths_readable(tmp_path: Path) -> None:
    """A remediation's `code` spans render as code (not literal backticks), their text still escaped;
    an underscore inside a word is left as it is in the raw Markdown (a PR comment's source)."""
    from markdown_it import MarkdownIt

    image = sample_image(tmp_path / "image")
    proc = run_cli("audit", str(image), "-f", "markdown")
    assert proc.returncode == 1
    rendered = MarkdownIt("commonmark").enable("table").render(proc.stdout)
    assert "<code>ssh-keygen -A</code>" in rendered  # IL101's remediation: `ssh-keygen -A`
    assert "`" not in rendered and "&#96;" not in proc.stdout
    assert "ssh_host_ed25519_key" in proc.stdout and not re.search("[a-z0-9]&#95;[a-z0-9]", proc.stdout)
    assert "<em>" not in rendered  # no word of a path or a remediation turned into emphasis
