"""Every JSON report the code can write is strict JSON and validates against the published schema.

The target kinds are read from the code itself (a target class's ``kind``, a ``kind=`` passed to the
disk opener, a ``{"kind": …, "path": …}`` target written by a command), so a new door that forgets
the schema fails here. Numbers come from anywhere: a rate over a window of no time is not finite,
and JSON has no such number.
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from imagelint.formats import RenderOptions, get_formatter
from imagelint.report import Finding, Report, Verdict
from imagelint.report.schema import report_schema
from imagelint.rulepacks import Severity
from tests.support import REPO


def _constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _names(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _kinds_in_code() -> set[str]:
    """``kind = "…"`` in a target class (named ``…Target``, wherever it lives), ``kind="…"`` to the
    disk opener, ``{"kind": "…", "path": …}``."""
    kinds: set[str | None] = set()
    for path in (REPO / "imagelint").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Target"):
                for item in node.body:
                    if isinstance(item, ast.Assign | ast.AnnAssign) and "kind" in _names(item):
                        kinds.add(_constant(item.value))
            elif isinstance(node, ast.FunctionDef) and node.name == "open_disk_target":
                named = zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                kinds |= {_constant(default) for arg, default in named if arg.arg == "kind"}
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("open_disk_target"):
                kinds |= {_constant(kw.value) for kw in node.keywords if kw.arg == "kind"}
            elif isinstance(node, ast.Dict):
                entries = {_constant(k): v for k, v in zip(node.keys, node.values, strict=True)}
                if "kind" in entries and "path" in entries:
                    kinds.add(_constant(entries["kind"]))
    return {k for k in kinds if k is not None}


KINDS = sorted(_kinds_in_code())
SCHEMA = report_schema()
VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_the_code_has_the_kinds_it_is_known_to_have() -> None:
    # the scan itself must see the doors (else the property below proves nothing)
    assert {"rootfs", "disk", "ebs-snapshot", "bundle", "host", "ami", "fleet"} <= set(KINDS)


def test_every_target_kind_in_the_code_is_in_the_schema() -> None:
    allowed = set(SCHEMA["properties"]["target"]["properties"]["kind"]["enum"])
    assert set(KINDS) - allowed == set()


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70))


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    duration=st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    evidence=st.dictionaries(st.text(max_size=8), numbers, max_size=4),
    facts=st.dictionaries(
        st.text(max_size=8), st.dictionaries(st.text(max_size=4), numbers, max_size=3), max_size=3
    ),
)
def test_every_report_is_strict_json_that_validates(
    kind: str, duration: float, evidence: dict[str, Any], facts: dict[str, Any]
) -> None:
    finding = Finding(
        rule_id="IL301",
        rule_name="memcg-growth",
        severity=Severity.HIGH,
        message="m",
        subject="s",
        remediation="r",
        evidence=evidence,
        failing=True,
    )
    report = Report(
        tool_version="0.1.0",
        target={"kind": kind, "path": "/x"},
        scopes=["image"],
        started_at="2026-12-03T00:00:00+00:00",
        duration_s=duration,
        fail_on=Severity.MEDIUM,
        verdict=Verdict.FAIL,
        rule_packs=[],
        config=None,
        rules=[],
        findings=[finding],
        facts=facts,
    )
    data = _strict(get_formatter("json").render(report, RenderOptions()))
    VALIDATOR.validate(data)
    for key, value in evidence.items():
        if isinstance(value, float) and not math.isfinite(value):
            assert data["findings"][0]["evidence"][key] is None
