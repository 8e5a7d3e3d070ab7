"""YAML that used to crash the loader (traceback, exit 1 = FAIL) is refused with one located line, exit 2.

Through the command line, as users meet it: ``imagelint rules validate FILE``, ``imagelint audit
ROOT -c CONFIG`` and ``imagelint audit ROOT -r PACK``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imagelint.config import load_config
from imagelint.errors import ImageLintError
from imagelint.rulepacks import load_packs
from tests.support import alarm_after, build_tree, run_cli

CRASHERS = {
    # RecursionError in the composer (and in validation)
    "deep-nesting": "rules: " + "[" * 400 + "]" * 400 + "\n",
    # ValueError: Python 3.11 refuses int() of more than 4300 digits
    "huge-int": "version: " + "9" * 5000 + "\n",
    # TypeError: unhashable type 'set', as a mapping key
    "set-key": "? !!set {a: null}\n: 1\n",
    # and what the fuzzer found besides (tests/rulepacks/fuzzing.py, benchmarks/fuzz_yaml.py)
    "control-character": "rules:\n  - id: X\x01\n",
    "list-key": "? [a, b]\n: 1\n",
    "bad-bool": "rules: !!bool maybe\n",
    "bad-timestamp": "rules: !!timestamp not-a-date\n",
    "empty-int": "rules: !!int ''\n",
    "hex-int-in-message": "version: 0x" + "f" * 5000 + "\n",
    "base-60": "version: " + "1:" * 3000 + "1\n",
    "empty": "",
    "key-with-newline": '"a\\nb": 1\n',
}
COMMANDS = ["validate", "audit-config", "audit-rules"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("image") / "root", {"/etc/hostname": "x\n"})


def _run(command: str, root: Path, path: Path):
    if command == "validate":
        return run_cli("rules", "validate", str(path), timeout=60)
    if command == "audit-config":
        return run_cli("audit", str(root), "-c", str(path), timeout=60)
    return run_cli("audit", str(root), "-r", str(path), timeout=60)


def _refusal(load, path: Path) -> str:
    """In process, for speed: the error the CLI would print (after ``imagelint: error: ``)."""
    with pytest.raises(ImageLintError) as caught:
        load(path)
    error = caught.value
    assert error.exit_code == 2, str(error)
    text = str(error)
    assert "\n" not in text and re.match(re.escape(str(path)) + r":[0-9]+(:[0-9]+)?: ", text), text
    return text


def _load_config(path: Path) -> None:
    load_config(path)


def _load_pack(path: Path) -> None:
    load_packs([path])


def _assert_one_located_line(proc, path: Path) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert re.search(re.escape(str(path)) + r":[0-9]+(:[0-9]+)?: ", lines[0]), lines[0]
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["deep-nesting", "huge-int", "set-key"])
def test_the_three_crashers_are_usage_errors_with_file_and_line(
    name: str, command: str, root: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(CRASHERS[name], encoding="utf-8")
    _assert_one_located_line(_run(command, root, path), path)


@pytest.mark.parametrize("name", sorted(set(CRASHERS) - {"deep-nesting", "huge-int", "set-key"}))
def test_more_crashers_are_usage_errors_with_file_and_line(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(CRASHERS[name], encoding="utf-8")
    _refusal(_load_config, path)
    _refusal(_load_pack, path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rules: " + "[" * 400 + "]" * 400, "nested deeper than 100 levels"),
        ("version: " + "9" * 5000, "a number of 5000 characters is too long"),
        ("? !!set {a: null}\n: 1", "the tag !!set is not allowed"),
        ("? [a]\n: 1", "a mapping key must be a string, not a list"),
        ("1: x", "a mapping key must be a string, not !!int"),
        ("rules:\n  - id: X\x01", "unacceptable character #x0001"),
        ("window: .nan", "not a finite number"),
    ],
)
def test_messages_say_what_is_wrong(text: str, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "pack.yaml"
    path.write_text(text, encoding="utf-8")
    assert expected in _refusal(_load_pack, path)


def test_deep_but_allowed_nesting_in_a_condition_is_still_one_located_line(tmp_path: Path) -> None:
    """90 levels of unless: within the YAML bound, but too deep for the schema validator's recursion."""
    check = "{kind: file.present, paths: [/x]}"
    for _ in range(90):
        check = "{kind: file.present, paths: [/x], unless: " + check + "}"
    path = tmp_path / "pack.yaml"
    path.write_text(
        "rules:\n  - {id: X100, name: deep, title: t, severity: low, scope: [image], message: m,\n"
        f"     remediation: r, check: {check}}}\n",
        encoding="utf-8",
    )
    proc = run_cli("rules", "validate", str(path), timeout=60)
    assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if proc.returncode == 2:
        _assert_one_located_line(proc, path)


def test_a_very_long_rule_id_is_refused_quickly(tmp_path: Path) -> None:
    """The schema's id pattern used to backtrack quadratically: 300,000 digits took minutes."""
    path = tmp_path / "pack.yaml"
    rule = "{id: A" + "0" * 300_000 + "x, name: n, title: t, severity: low, scope: [image], "
    rule += "check: {kind: file.present, paths: [/x]}, message: m, remediation: r}"
    path.write_text(f"rules:\n  - {rule}\n", encoding="utf-8")
    with alarm_after(120, lambda: AssertionError("the id pattern backtracks")):
        assert "does not match" in _refusal(_load_pack, path)


@pytest.mark.parametrize(
    "field", ["{path.__class__}", "{path[0]}", "{line:>999999999}", "{path:{id}}", "{0}"]
)
def test_message_templates_take_plain_variables_only(field: str, tmp_path: Path) -> None:
    path = tmp_path / "pack.yaml"
    path.write_text(
        "rules:\n  - {id: X100, name: n, title: t, severity: low, scope: [image], remediation: r,\n"
        f"     check: {{kind: file.present, paths: [/x]}}, message: '{field} exists'}}\n",
        encoding="utf-8",
    )
    _refusal(_load_pack, path)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [("missing.yaml", "does not exist"), ("empty-dir", "without *.yaml"), ("a\\nb", "does not exist")],
)
def test_config_rules_entries_are_checked_at_their_line(entry: str, expected: str, tmp_path: Path) -> None:
    (tmp_path / "empty-dir").mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(f'version: 1\nrules:\n  - "{entry}"\n', encoding="utf-8")
    line = _refusal(_load_config, config)
    assert line.startswith(f"{config}:3:") and expected in line


_NESTED = """rules:
  - id: X100
    name: nested-spec
    title: t
    severity: high
    scope: [image]
    check:
      kind: systemd.boot_failure_loop
      vendor_config:
        - units: [ecs.service]
          reason: r
          unless: {UNLESS}
    message: "{unit}"
    remediation: fix
"""


# Found by benchmarks/fuzz_yaml.py (250,000 cases): a nested check spec of systemd.boot_failure_loop
# was handed to its kind's own validation before its parameters were checked against that kind's
# schema, so a missing or mistyped parameter escaped as KeyError/TypeError (exit 1, a traceback).
@pytest.mark.parametrize(
    "unless",
    [
        "{kind: file.contains, paths: [/etc/ecs/ecs.config]}",  # no pattern: KeyError
        "{kind: {a: b}}",  # a kind that is a mapping: TypeError (unhashable)
        "{kind: file.contains, paths: [/etc/x], pattern: [a, b]}",  # a list for a regex: TypeError
    ],
    ids=["missing-parameter", "kind-not-a-string", "pattern-not-a-string"],
)
def test_a_bad_nested_check_spec_is_a_usage_error_with_file_and_line(unless: str, tmp_path: Path) -> None:
    path = tmp_path / "nested.yaml"
    path.write_text(_NESTED.replace("{UNLESS}", unless), encoding="utf-8")
    _refusal(_load_pack, path)  # exit 2, one line naming file:line, no traceback


_CONFIGURED = _NESTED.replace(
    "      kind: systemd.boot_failure_loop\n      vendor_config:\n        - units: [ecs.service]\n"
    "          reason: r\n          unless: {UNLESS}\n",
    "      kind: systemd.unit_enabled\n      units: [ecs.service]\n      configured: {UNLESS}\n",
)


@pytest.mark.parametrize("template", [_NESTED, _CONFIGURED], ids=["vendor_config", "configured"])
def test_a_nested_check_spec_its_kind_refuses_is_located_at_the_nested_parameter(
    template: str, tmp_path: Path
) -> None:
    assert "{UNLESS}" in template
    path = tmp_path / "nested.yaml"
    pack = template.replace("{UNLESS}", "{kind: file.contains, paths: [/x], pattern: '('}")
    path.write_text(pack)
    lines = pack.splitlines()
    number = next(i for i, text in enumerate(lines, 1) if "pattern: '('" in text)
    column = lines[number - 1].index("'('") + 1  # before: the rule's check line, not the nested pattern
    assert _refusal(_load_pack, path).startswith(f"{path}:{number}:{column}: ")
