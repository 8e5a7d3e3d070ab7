"""Broken rule packs are refused with file:line:column and exit 2; good ones load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.support import run_cli

GOOD_RULE = """\
rules:
  - id: X100
    name: tmp-marker
    title: A marker file exists
    severity: low
    scope: [image]
    check:
      kind: file.present
      paths: [/etc/marker]
    message: "{path} exists"
    remediation: remove it
"""


def _pack(tmp_path: Path, text: str, name: str = "pack.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _validate(path: Path) -> tuple[int, str]:
    proc = run_cli("rules", "validate", str(path))
    return proc.returncode, proc.stderr.strip()


def test_good_pack_validates(tmp_path: Path) -> None:
    code, err = _validate(_pack(tmp_path, GOOD_RULE))
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        (GOOD_RULE.replace("title: A marker", "title: [A marker"), ":5:13", "invalid YAML"),
        ("rules:\n  - &a {id: X1}\n  - *a\n", ":3:5", "aliases"),
        (GOOD_RULE.replace("kind: file.present", "kind: file.nope"), ":8:13", "file.nope"),
        (GOOD_RULE.replace("paths: [/etc/marker]", "paths: /etc/marker"), ":9:14", "is not of type 'array'"),
        (
            GOOD_RULE.replace(
                "kind: file.present\n      paths: [/etc/marker]",
                "kind: file.contains\n      paths: [/etc/m]\n      pattern: '(unclosed'",
            ),
            ":10:16",
            "does not compile",
        ),
        (GOOD_RULE.replace('"{path} exists"', '"{pth} exists"'), ":10:14", "{pth}"),
        (GOOD_RULE.replace("severity: low", "severity: low\n    severity: high"), ":6:5", "duplicate key"),
        (
            GOOD_RULE.replace("remediation: remove it", "remediation: remove it\n    colour: red"),
            ":12:13",
            "colour",
        ),
        (GOOD_RULE + GOOD_RULE.replace("rules:\n", ""), ":12:5", "already defined"),
        (GOOD_RULE.replace("[image]", "[image]\n    subsumes: [X101, X100]"), ":7:22", "itself"),
        (GOOD_RULE.replace("[image]", "[image]\n    subsumes: [x1]"), ":7:16", "does not match"),
    ],
    ids=[
        "yaml-syntax",
        "alias",
        "unknown-kind",
        "wrong-type",
        "bad-regex",
        "template-var",
        "dup-key",
        "unknown-key",
        "dup-id",
        "subsumes-itself",
        "subsumes-not-an-id",
    ],
)
def test_broken_pack_is_refused_with_location(tmp_path: Path, text: str, where: str, what: str) -> None:
    path = _pack(tmp_path, text)
    code, err = _validate(path)
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert f"{path}{where}" in err
    assert what in err


def test_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    path = _pack(tmp_path, "\n".join(lines) + "\nrules: []\n")
    code, err = _validate(path)
    assert code == 2 and "aliases" in err and f"{path}:2:" in err


def test_duplicate_of_a_builtin_id_is_refused(tmp_path: Path) -> None:
    code, err = _validate(_pack(tmp_path, GOOD_RULE.replace("X100", "IL101")))
    assert code == 2 and "IL101 is already defined at" in err and "hygiene.yaml" in err


def test_rules_schema_is_a_valid_schema_that_accepts_builtin_packs() -> None:
    proc = run_cli("schema", "rules")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    kinds = schema["$defs"]["check"]["properties"]["kind"]["enum"]
    assert {"file.present", "file.contains", "file.permissions", "sshd.option"} <= set(kinds)


def test_rules_list_and_show() -> None:
    listed = run_cli("rules", "list", "--json")
    ids = [r["id"] for r in json.loads(listed.stdout)]
    assert "IL101" in ids and len(ids) == len(set(ids))
    shown = run_cli("rules", "show", "IL110")
    assert shown.returncode == 0 and "PermitRootLogin" in shown.stdout
    missing = run_cli("rules", "show", "IL999")
    assert missing.returncode == 2 and "no rule 'IL999'" in missing.stderr


NESTED_RULE = GOOD_RULE.replace(
    "      kind: file.present\n      paths: [/etc/marker]\n",
    "      kind: file.present\n      paths: [/etc/marker]\n"
    "      unless: {kind: file.contains, paths: [/etc/m], pattern: x}\n",
)


def test_a_kept_pack_loads_the_same_rules_without_importing_jsonschema(tmp_path: Path) -> None:
    """The second load of the same bytes is the kept pack (imagelint.rulepacks.cache), nested check
    specs too."""
    pack = _pack(tmp_path, NESTED_RULE)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from imagelint.rulepacks.loader import load_pack\n"
        "rules = load_pack(Path(sys.argv[1])).rules\n"
        "shown = repr([(r.id, r.source, r.check) for r in rules])\n"
        "print('jsonschema' in sys.modules, shown.encode().hex())\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("IMAGELINT_NO_CACHE", None)
    runs = [
        subprocess.run(
            [sys.executable, "-c", script, str(pack)], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][0] == "True" and runs[1][0] == "False", runs
    assert runs[0][1] == runs[1][1]


def test_a_nested_spec_is_validated_when_the_pack_is_not_kept(tmp_path: Path, monkeypatch) -> None:
    from imagelint.errors import RulePackError
    from imagelint.rulepacks.loader import load_pack

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    load_pack(_pack(tmp_path, NESTED_RULE))
    bad = _pack(tmp_path, NESTED_RULE.replace("pattern: x", "pattern: x, colour: red"), "bad.yaml")
    with pytest.raises(RulePackError, match="colour"):
        load_pack(bad)


def test_columns_count_characters_not_bytes(tmp_path: Path) -> None:
    """libyaml parses UTF-8 bytes; its marks still count characters, as the error location must."""
    text = GOOD_RULE.replace("title: A marker file exists", 'title: "ééé" x')
    code, err = _validate(_pack(tmp_path, text))
    assert code == 2 and ":4:18: invalid YAML" in err, err
