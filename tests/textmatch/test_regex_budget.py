"""Regexes meet adversarial image data: built-in rules stay linear, custom patterns are bounded.

Regression tests for the hangs: IL104's ``^\\s*[^#\\s]`` on 200 KB of blank lines in
authorized_keys (minutes), ``(a+)+$`` from a custom pack on a 31-byte file (forever). Every such
run now finishes; a pattern that only Python's ``re`` can run and that backtracks past its budget is
an error on the rule naming the file (exit 3, inconclusive), never a hang and never a pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from imagelint import textmatch
from imagelint.facts.journal.patterns import (
    ENA_ANY,
    ENA_DEVICE,
    ENA_RESET_PATH,
    SIGNALS,
    TEXT_PATTERNS,
    SignalSpec,
)
from tests.support import REPO, os_root, run_cli, run_cli_measured

sys.path.insert(0, str(REPO / "benchmarks"))
import regex_hangs

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA builder@ci\n"


def _pack(tmp_path: Path, pattern: str, path: str = "/etc/target.conf") -> Path:
    pack = tmp_path / "custom.yaml"
    pack.write_text(
        "rules:\n  - id: C100\n    name: custom-pattern\n    title: t\n    severity: high\n"
        "    scope: [image]\n    check:\n      kind: file.contains\n"
        f"      paths: [{path}]\n      pattern: '{pattern}'\n"
        '    message: "{path}:{line} matches"\n    remediation: r\n',
        encoding="utf-8",
    )
    return pack


def _audit(root: Path, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    out = tmp_path / "report.json"
    run = run_cli_measured("audit", str(root), "-f", f"json:{out}", *args, env=env, timeout=60)
    run.assert_within_memory()
    report = json.loads(out.read_text()) if out.exists() else {}
    return run, report


@pytest.mark.parametrize(
    ("rule", "path", "content", "line"),
    [
        ("IL104", "/root/.ssh/authorized_keys", "\n" * 200_000 + KEY, 200_001),
        ("IL104", "/home/a/.ssh/authorized_keys", " \t\n" * 60_000 + "# c\n" + KEY, 60_002),
        ("IL107", "/root/.aws/credentials", "\n" * 200_000 + "AWS_SECRET_ACCESS_KEY = x\n", 200_001),
        ("IL102", "/etc/machine-id", "\n" * 200_000 + "0123456789abcdef0123456789abcdef\n", 200_001),
    ],
)
def test_builtin_rules_on_blank_line_bombs_finish_and_find(
    rule: str, path: str, content: str, line: int, tmp_path: Path
) -> None:
    root = os_root(tmp_path / "root", {path: content})
    proc, report = _audit(root, tmp_path, "--select", rule)
    assert proc.returncode == 1, proc.stderr[-2000:]
    found = [f for f in report["findings"] if f["rule_id"] == rule]
    assert [(f["path"], f["line"]) for f in found] == [(path, line)]


@pytest.mark.parametrize(
    ("rule", "path", "content"),
    [
        ("IL104", "/root/.ssh/authorized_keys", "\n" * 200_000),
        ("IL104", "/root/.ssh/authorized_keys", "  \t \n# comment\n" * 40_000),
        ("IL107", "/root/.aws/credentials", "\n" * 200_000 + "[default]\n"),
        ("IL102", "/etc/machine-id", "\n" * 200_000),
    ],
)
def test_builtin_rules_on_blank_line_bombs_finish_and_pass(
    rule: str, path: str, content: str, tmp_path: Path
) -> None:
    """Nothing to find: the old patterns scanned every blank line from every line start (minutes)."""
    root = os_root(tmp_path / "root", {path: content})
    proc, report = _audit(root, tmp_path, "--select", rule)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["findings"] == [] and report["errors"] == []


def test_custom_catastrophic_pattern_runs_in_linear_time(tmp_path: Path) -> None:
    root = os_root(tmp_path / "root", {"/etc/target.conf": "a" * 30 + "!"})
    proc, report = _audit(root, tmp_path, "--no-builtin-rules", "-r", str(_pack(tmp_path, "(a+)+$")))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["findings"] == []
    root2 = os_root(tmp_path / "root2", {"/etc/target.conf": "x\n" + "a" * 30 + "\n"})
    proc, report = _audit(root2, tmp_path, "--no-builtin-rules", "-r", str(_pack(tmp_path, "(a+)+$")))
    assert proc.returncode == 1 and [f["line"] for f in report["findings"]] == [2]


def test_a_pattern_only_python_can_run_that_overruns_its_budget_is_an_error_not_a_pass(
    tmp_path: Path,
) -> None:
    root = os_root(tmp_path / "root", {"/etc/target.conf": "a" * 40 + "!"})
    pack = _pack(tmp_path, r"(a+)+\1$")  # a backreference: RE2 cannot run it
    proc, report = _audit(
        root, tmp_path, "--no-builtin-rules", "-r", str(pack), env={textmatch.BUDGET_ENV: "0.5"}
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    errors = [e for e in report["errors"] if e.get("rule_id") == "C100"]
    assert errors and errors[0]["where"] == "/etc/target.conf" and "budget" in errors[0]["message"]


def test_a_pattern_neither_engine_compiles_is_refused_at_load_time(tmp_path: Path) -> None:
    for pattern in ["(unclosed", r"\p{L}", "(?<name>x)", r"x\z"]:  # RE2-only syntax is refused too
        pack = _pack(tmp_path, pattern)
        proc = run_cli("rules", "validate", str(pack), timeout=60)
        assert proc.returncode == 2, (pattern, proc.stderr)
        assert len(proc.stderr.splitlines()) == 1 and f"{pack}:10:" in proc.stderr, proc.stderr


def test_every_builtin_pattern_runs_on_re2() -> None:
    patterns = regex_hangs.builtin_patterns()
    assert len(patterns) >= 14
    for pattern, multiline, ignore_case, source in patterns:
        compiled = textmatch.compile(pattern, multiline=multiline, ignore_case=ignore_case)
        assert compiled.engine is textmatch.Engine.RE2, (source, pattern)


def test_the_benchmark_sample_reports_budget_errors_rather_than_hanging() -> None:
    """A small run of benchmarks/regex_hangs.py: every case ends; only the custom patterns that RE2
    cannot run end in a budget error; the built-in ones all ran on RE2 (no timing assertions)."""
    outcomes = regex_hangs.run(size=64 * 1024, budget=0.3)
    custom = {p for p, _ in regex_hangs.CUSTOM}
    errors = {o.pattern for o in outcomes if o.result == "budget error"}
    assert r"(a+)+\1$" in errors
    assert errors <= {r"(a+)+\1$", r"^(\s*)*x", r"^(\w+\s?)*$"}
    assert all(o.engine == "re2" for o in outcomes if o.pattern not in custom)
    assert {o.result for o in outcomes if o.pattern == "(a+)+$"} <= {"match", "no match"}


def test_journal_patterns_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(textmatch.BUDGET_ENV, "0.3")
    spec = SignalSpec("custom", {"_TRANSPORT": "kernel"}, r"(a+)+\1$")
    compiled = spec.compiled()
    assert compiled is not None and compiled.engine is textmatch.Engine.PYTHON
    with pytest.raises(textmatch.RegexBudgetError) as caught:
        compiled.search("a" * 40 + "!")
    assert caught.value.exit_code == 3 and "journal MESSAGE" in str(caught.value)
    for signal in SIGNALS.values():
        regex = signal.compiled()
        assert regex is None or regex.engine is textmatch.Engine.RE2
    ena = [ENA_ANY, ENA_DEVICE, *(p for m in ENA_RESET_PATH for p in (m.regex, m.qid, m.cpu) if p)]
    assert {p.engine for p in ena} == {textmatch.Engine.RE2}
    for text in TEXT_PATTERNS:
        assert text.regex.search("x" * 100_000 + " \u2028é\n") is None and text.regex.worker_calls == 0


def test_undecodable_bytes_are_matched_as_python_would(tmp_path: Path) -> None:
    root = os_root(tmp_path / "root")
    (root / "root/.ssh").mkdir(parents=True)
    (root / "root/.ssh/authorized_keys").write_bytes(b"\n\n\xff\xfe ssh-rsa AAAA\n")
    proc, report = _audit(root, tmp_path, "--select", "IL104")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert [f["line"] for f in report["findings"] if f["rule_id"] == "IL104"] == [3]


def test_version_does_not_import_re2() -> None:
    code = "import sys; from imagelint.cli import main; sys.argv = ['imagelint', '--version']; main(); "
    code += "print('re2' in sys.modules, 'imagelint.textmatch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.splitlines()[-1] == "False False"


def test_sshd_include_bomb_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """Each of 16 levels includes the next one twice: 2^16 file reads without the cap."""
    tree = {"/etc/ssh/sshd_config": "Include /etc/ssh/l1.conf /etc/ssh/l1.conf\n"}
    for level in range(1, 16):
        tree[f"/etc/ssh/l{level}.conf"] = f"Include /etc/ssh/l{level + 1}.conf /etc/ssh/l{level + 1}.conf\n"
    tree["/etc/ssh/l16.conf"] = "PermitRootLogin yes\n"
    root = os_root(tmp_path / "root", tree)
    proc, report = _audit(root, tmp_path, "--select", "IL110")
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert any("include bomb" in e["message"] for e in report["errors"])


def test_worker_answers_match_python(tmp_path: Path) -> None:
    compiled = textmatch.compile(r"(\w)\1", multiline=True)
    text = "ab\ncdd\néé x\n"
    assert [m.span() for m in compiled.finditer(text)] == [(4, 6), (7, 9)]
    assert [(m.number, m.line) for m in compiled.match_lines(text, limit=5)] == [(2, "cdd"), (3, "éé x")]
    assert compiled.worker_calls == 2


def test_a_pattern_is_translated_once_and_each_use_keeps_its_own_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rule's pattern is compiled when the rule is loaded (validate) and again when it is evaluated:
    the second compilation is the first one's (a pure function of the pattern and its flags)."""
    parsed: list[str] = []
    real = textmatch._parse
    monkeypatch.setattr(
        textmatch, "_parse", lambda pattern, flags: parsed.append(pattern) or real(pattern, flags)
    )
    pattern = r"^PermitRootLogin\s+yes-once-\d+"
    first, second = textmatch.compile(pattern), textmatch.compile(pattern)
    textmatch.compile(pattern, ignore_case=True)
    assert parsed == [pattern, pattern]  # once per flags
    first.spent = 1.0
    assert second.spent == 0.0 and second.search("PermitRootLogin yes-once-1") is not None
    with pytest.raises(textmatch.PatternError):
        textmatch.compile("(")
