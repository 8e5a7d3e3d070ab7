"""Regression tests: file names and file contents from the image in every output format.

1. One undecodable byte in a name or a matched line used to crash the JSON, SARIF and Markdown writers
   (``UnicodeEncodeError: surrogates not allowed``), leave an empty JSON file, and skip the GitHub
   step summary and outputs. 2. A name holding newlines and ``::`` lines forged workflow commands under
   GitHub Actions, and ESC sequences reached the terminal raw. The last tests run the CLI end to end.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from imagelint.formats import RenderOptions, get_formatter
from imagelint.formats.outputs import OutputSpec, write_outputs
from imagelint.report import Finding, Outcome, Report, ReportError, RuleResult, Verdict
from imagelint.report.schema import report_schema
from imagelint.rulepacks import Severity
from tests.formats.ci_helpers import SARIF_SCHEMA, parse_commands, parse_output_file
from tests.support import need, os_root

FORMATS = ("text", "json", "sarif", "junit", "github", "markdown", "html")
BAD_NAME = b"/etc/bad\xffname".decode("utf-8", "surrogateescape")  # what os.fsdecode gives
INJECTION = "authorized_keys\n::error file=app.py,line=3::Injected\n::stop-commands::abc123\n"
ESCAPES = "esc\x1b[2Jname\x1b]0;title\x07"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _report(findings: list[Finding], errors: list[ReportError] | None = None) -> Report:
    return Report(
        tool_version="0.1.0",
        target={"kind": "rootfs", "path": "/tmp/image"},
        scopes=["image"],
        started_at="2024-05-01T12:00:00+00:00",
        duration_s=0.5,
        fail_on=Severity.MEDIUM,
        verdict=Verdict.FAIL,
        rule_packs=[],
        config=None,
        rules=[
            RuleResult("IL109", "world-writable-system-path", "t", Severity.HIGH, Outcome.FAIL, "hygiene"),
            RuleResult("IL104", "root-authorized-keys", "t", Severity.HIGH, Outcome.ERROR, "hygiene", "FIFO"),
        ],
        findings=findings,
        errors=errors or [],
    )


def _world_writable(path: str, excerpt: str = "") -> Finding:
    return Finding(
        rule_id="IL109",
        rule_name="world-writable-system-path",
        severity=Severity.HIGH,
        message=f"{path} is world-writable (mode 0666 has 0002 set)",
        subject=path,
        remediation="chmod o-w the path",
        path=path,
        evidence={"problem": "mode 0666 has 0002 set", "excerpt": excerpt},
        failing=True,
    )


def _render(fmt: str, report: Report) -> str:
    return get_formatter(fmt).render(report, RenderOptions())


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SARIF_SCHEMA.read_text())
    return jsonschema.validators.validator_for(schema)(schema)


# -- defect 1: one undecodable byte -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_writes_an_undecodable_byte(fmt: str) -> None:
    line = b"ssh-ed25519 AAAA \xfe\xff".decode(
        "utf-8", "surrogateescape"
    )  # a matched line, decode_text's way
    report = _report([_world_writable(BAD_NAME, excerpt=line)], [ReportError("cannot read", where=BAD_NAME)])
    text = _render(fmt, report)
    text.encode("utf-8")  # strict: no lone surrogate left
    assert "/etc/bad\\xffname" in text.replace("&#92;", "\\").replace("\\\\", "\\")


def test_json_keeps_the_exact_bytes_and_validates(sarif_validator: jsonschema.protocols.Validator) -> None:
    line = b"key \xfe\xff".decode("utf-8", "surrogateescape")
    report = _report([_world_writable(BAD_NAME, excerpt=line)])
    data = json.loads(_render("json", report))
    jsonschema.validate(data, report_schema())
    [finding] = data["findings"]
    assert finding["path"] == "/etc/bad\\xffname" and finding["location"] == "/etc/bad\\xffname"
    assert base64.b64decode(finding["evidence"]["path_b64"]) == b"/etc/bad\xffname"
    assert base64.b64decode(finding["evidence"]["excerpt_b64"]) == b"key \xfe\xff"
    sarif = json.loads(_render("sarif", report))
    sarif_validator.validate(sarif)
    assert (
        sarif["runs"][0]["results"][0]["properties"]["evidence"]["path_b64"]
        == finding["evidence"]["path_b64"]
    )


def test_a_failing_format_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A format whose output cannot be written must not truncate the report that was there."""
    import imagelint.formats.outputs

    def broken(name: str, document: str, subject: object, options: RenderOptions) -> str:
        return '{"half": "\udcff"}'  # what an unescaped surrogate used to do at write time

    previous = tmp_path / "out.json"
    previous.write_text('{"previous": "report"}\n')
    monkeypatch.setattr(imagelint.formats.outputs, "render", broken)
    with pytest.raises(UnicodeEncodeError):
        write_outputs(_report([]), [OutputSpec("json", previous)], RenderOptions())
    assert previous.read_text() == '{"previous": "report"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left behind


def test_report_files_are_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sub" / "out.md"
    out.parent.mkdir()  # never created by the writer: a missing directory is refused
    write_outputs(_report([_world_writable("/etc/x")]), [OutputSpec("markdown", out)], RenderOptions())
    assert "/etc/x" in out.read_text() and oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    out.chmod(0o600)

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", fail)
    with pytest.raises(Exception, match="cannot write markdown report"):
        write_outputs(_report([]), [OutputSpec("markdown", out)], RenderOptions())
    assert "/etc/x" in out.read_text() and sorted(p.name for p in out.parent.iterdir()) == ["out.md"]
    monkeypatch.undo()
    write_outputs(_report([]), [OutputSpec("markdown", out)], RenderOptions())
    assert "No findings." in out.read_text() and out.stat().st_mode & 0o777 == 0o600  # mode kept


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- defect 2: injection through names -----------------------------------------------------------------


def _hostile_report() -> Report:
    fifo = f"/root/.ssh/{INJECTION}"
    error = ReportError("is a FIFO, not a regular file; not opened", rule_id="IL104", where=fifo)
    findings = [_world_writable(f"/etc/{ESCAPES}"), _world_writable("/etc/x ##[error]legacy\n::warning::w")]
    return _report(findings, [error])


def test_github_annotations_cannot_be_forged() -> None:
    text = _render("github", _hostile_report())
    commands = parse_commands(text)
    lines = text.splitlines()
    assert len(lines) == len(commands) == 3  # one per finding and error, nothing else
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    assert "Injected" in commands[0]["message"] and "\n" not in commands[0]["message"]
    assert "::stop-commands::" in commands[0]["message"]  # shown, as data inside the one command
    assert "##[" not in text and not RAW_CONTROL.search(text.replace("\n", ""))


@pytest.mark.parametrize("fmt", ["text", "markdown", "junit", "json", "sarif"])
def test_no_command_line_and_no_raw_escape_in_any_output(fmt: str) -> None:
    text = _render(fmt, _hostile_report())
    for line in re.split(r"\r\n|\r|\n", text):
        assert not line.lstrip().startswith("::"), line
    assert "##[" not in text and "\x1b" not in text and "\x07" not in text
    assert not RAW_CONTROL.search(text.replace("\n", ""))


def test_text_shows_escapes_visibly_and_never_breaks_a_finding() -> None:
    text = _render("text", _hostile_report())
    assert "\\x1b[2Jname\\x1b]0;title\\x07" in text
    assert "authorized_keys\\n::error file=app.py,line=3::Injected\\n::stop-commands::abc123\\n" in text


def test_rich_markup_in_a_message_is_text() -> None:
    text = _render("text", _report([_world_writable("/etc/[/] [bold]x[/bold] [link=https://e.example]y")]))
    assert "/etc/[/] [bold]x[/bold] [link=https://e.example]y" in text


def test_markdown_names_cannot_inject() -> None:
    from markdown_it import MarkdownIt

    name = "/etc/a|b<img src=x>[l](https://e.example)`x`*y*\n# h\x1b[2J"
    text = _render("markdown", _report([_world_writable(name)], [ReportError("- 1. > ```", where=name)]))
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<img" not in html and "<a " not in html and "<em>" not in html and "<h1>" not in html
    assert "<pre>" not in html and "<blockquote>" not in html and "<ol" not in html and "\x1b" not in text
    rows = [row for row in html.split("<tr>") if "/etc/a|b&lt;img src=x&gt;" in row]
    assert rows and all(row.count("<td") == 6 for row in rows)


def test_junit_is_xml_whatever_the_names() -> None:
    name = "/etc/\x01\x1b[2J\ufffe\udcff]]><x>&\n"
    report = _report([_world_writable(name)], [ReportError("\x00 bad", where=name)])
    root = ET.fromstring(_render("junit", report).encode("utf-8"))
    assert root.tag == "testsuites"


def test_github_outputs_survive_any_value(tmp_path: Path) -> None:
    from imagelint.formats.github import write_outputs as write_github_outputs

    out = tmp_path / "output"
    value = "line 1\nghadelimiter_x\nEOF\r\nlast"
    write_github_outputs(out, {"verdict": "fail", "text": value})
    assert parse_output_file(out) == {"verdict": "fail", "text": value.replace("\r\n", "\n")}


# -- end to end, through the CLI ------------------------------------------------------------------------


def _crafted_tree(root: Path) -> Path:
    os_root(root)
    (root / "root/.ssh").mkdir(parents=True)
    bad = os.fsencode(root) + b"/etc/bad\xffname"
    with open(bad, "wb") as f:
        f.write(b"x\n")
    os.chmod(bad, 0o666)
    (root / "etc" / ESCAPES).write_text("x")
    (root / "etc" / ESCAPES).chmod(0o666)
    os.mkfifo(root / "root/.ssh" / INJECTION)
    return root


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    exe = Path(sys.executable).parent / "imagelint"
    full = {**os.environ, "NO_COLOR": "1", **env}
    for variable in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        if variable not in env:  # the test decides, not the CI the tests run in
            full.pop(variable, None)
    return subprocess.run([str(exe), *args], capture_output=True, cwd=cwd, env=full, timeout=120, check=False)


def _check_files(tmp: Path, sarif_validator: jsonschema.protocols.Validator) -> dict[str, str]:
    texts = {}
    for name in ("out.json", "out.sarif", "out.md", "out.xml", "summary.md", "outputs"):
        data = (tmp / name).read_bytes()
        assert data, f"{name} is empty"
        texts[name] = data.decode("utf-8")  # strict: valid UTF-8
        assert b"\x1b" not in data and b"\x07" not in data, name
    report = json.loads(texts["out.json"])
    jsonschema.validate(report, report_schema())
    sarif_validator.validate(json.loads(texts["out.sarif"]))
    ET.fromstring(texts["out.xml"].encode("utf-8"))
    outputs = parse_output_file(tmp / "outputs")
    assert outputs["verdict"] == "fail" and outputs["exit-code"] == "1"
    import hashlib

    assert outputs["report-sha256"] == hashlib.sha256((tmp / "out.json").read_bytes()).hexdigest()
    assert "## imagelint: ❌ FAIL" in texts["summary.md"]
    return texts


def test_cli_end_to_end_on_a_hostile_tree(
    tmp_path: Path, sarif_validator: jsonschema.protocols.Validator
) -> None:
    need(hasattr(os, "mkfifo"), "needs FIFOs")
    tree = _crafted_tree(tmp_path / "tree")
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "outputs"),
        "GITHUB_WORKSPACE": "",
    }
    args = ["audit", str(tree), "-f", "json:out.json", "-f", "sarif:out.sarif", "-f", "markdown:out.md"]
    proc = _run([*args, "-f", "junit:out.xml", "-f", "text", "-f", "github"], tmp_path, env)
    assert proc.returncode == 1, proc.stderr.decode(errors="replace")  # the findings are real
    stdout = proc.stdout.decode("utf-8")  # strict
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    for line in re.split(r"\r\n|\r|\n", stdout):
        assert not line.lstrip().startswith("::") or re.match(r"::(error|warning|notice) ", line), line
    commands = parse_commands(stdout)
    assert not any(c.get("file") == "app.py" or c["message"] == "Injected" for c in commands)
    assert sum(1 for line in stdout.splitlines() if line.startswith("::")) == len(commands) == 3
    texts = _check_files(tmp_path, sarif_validator)
    report = json.loads(texts["out.json"])
    paths = {f["path"] for f in report["findings"]}
    assert {"/etc/bad\\xffname", f"/etc/{ESCAPES}"} <= paths  # JSON keeps the exact string (escaped by JSON)
    [bad] = [f for f in report["findings"] if f["path"] == "/etc/bad\\xffname"]
    assert base64.b64decode(bad["evidence"]["path_b64"]) == b"/etc/bad\xffname"
    assert any(INJECTION in (e["where"] or "") for e in report["errors"])


def test_cli_matched_line_with_undecodable_bytes(
    tmp_path: Path, sarif_validator: jsonschema.protocols.Validator
) -> None:
    tree = os_root(tmp_path / "tree")
    (tree / "home/u/.ssh").mkdir(parents=True)
    (tree / "home/u/.ssh/authorized_keys").write_bytes(b"ssh-ed25519\xff\x1b]0;t\x07##[error]x AAAA u@h\n")
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(tmp_path / "outputs")}
    args = ["audit", str(tree), "--github", "-f", "json:out.json", "-f", "sarif:out.sarif"]
    proc = _run([*args, "-f", "markdown:out.md", "-f", "junit:out.xml", "-f", "github"], tmp_path, env)
    assert proc.returncode == 1, proc.stderr.decode(errors="replace")
    assert b"\x1b" not in proc.stdout and "##[" not in proc.stdout.decode("utf-8")
    texts = _check_files(tmp_path, sarif_validator)
    [finding] = [f for f in json.loads(texts["out.json"])["findings"] if f["rule_id"] == "IL104"]
    excerpt = base64.b64decode(finding["evidence"]["excerpt_b64"])
    assert excerpt.startswith(b"ssh-ed25519\xff\x1b]0;t\x07##[error]x")
    proc = _run(["audit", str(tree), "-f", "json"], tmp_path, {})  # JSON on stdout: valid UTF-8 too
    assert json.loads(proc.stdout.decode("utf-8"))["findings"]
