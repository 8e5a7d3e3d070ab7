"""The engine's verdict: fail over inconclusive over pass; one broken rule never stops the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagelint.checks import CheckContext, CheckKind, Observation, register, registry, unregister
from imagelint.checks.params import NoParameters
from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.report import Outcome, Verdict
from imagelint.rulepacks import CheckSpec, Rule, RulePack, Scope, Severity
from imagelint.rulepacks.loader import typed_arguments
from imagelint.sampletree import build_tree
from tests.support import run_cli


class Exploding(CheckKind[NoParameters]):
    name = "test.exploding"
    summary = "raises"
    parameters = NoParameters

    def evaluate(self, ctx: CheckContext, params: NoParameters) -> list[Observation]:
        raise ZeroDivisionError("boom")


@pytest.fixture
def exploding():
    registry()  # the built-in kinds first, so discovery does not run inside the test
    register(Exploding)
    yield
    unregister(Exploding.name)


def _spec(kind: str, params: dict[str, Any], **conditions: tuple[CheckSpec, ...]) -> CheckSpec:
    return CheckSpec(kind, params, typed_arguments(kind, params), **conditions)


def _rule(rule_id: str, kind: str, severity: Severity = Severity.HIGH, **params: Any) -> Rule:
    return Rule(rule_id, rule_id.lower(), "t", severity, (Scope.IMAGE,), _spec(kind, params), "{path}", "fix")


def _audit(root: Path, *rules: Rule, **config: Any):
    pack = RulePack("test", "test.yaml", "0" * 64, "", list(rules))
    return audit(
        __import__("imagelint.targets").targets.RootfsTarget(root), [pack], Config(**config), RunSettings()
    )


def test_a_raising_rule_is_an_error_and_the_others_still_run(exploding, tmp_path: Path) -> None:
    root = build_tree(tmp_path / "img", {"/etc/marker": "x"})
    report = _audit(
        root, _rule("T001", "test.exploding"), _rule("T002", "file.present", Severity.LOW, paths=["/etc/m*"])
    )
    outcomes = {r.rule_id: r.outcome for r in report.rules}
    assert outcomes == {"T001": Outcome.ERROR, "T002": Outcome.FAIL}
    assert report.errors[0].rule_id == "T001" and "ZeroDivisionError: boom" in report.errors[0].message
    assert report.verdict is Verdict.INCONCLUSIVE  # the low finding is below fail-on=medium


def test_fail_wins_over_inconclusive(exploding, tmp_path: Path) -> None:
    root = build_tree(tmp_path / "img", {"/etc/marker": "x"})
    report = _audit(
        root, _rule("T001", "test.exploding"), _rule("T002", "file.present", paths=["/etc/marker"])
    )
    assert report.verdict is Verdict.FAIL and int(report.verdict.exit_code) == 1


def test_not_applicable_does_not_change_a_pass(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "img", {"/etc/hostname": "x"})
    report = _audit(root, _rule("T001", "file.contains", paths=["/etc/absent"], pattern="x"))
    assert [r.outcome for r in report.rules] == [Outcome.NOT_APPLICABLE]
    assert report.verdict is Verdict.PASS


def test_when_and_unless_conditions(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "img", {"/etc/ecs/ecs.config": "ECS_CLUSTER=prod\n", "/etc/flag": ""})
    cluster = _spec("file.contains", {"paths": ["/etc/ecs/ecs.config"], "pattern": r"^ECS_CLUSTER=\S+"})
    absent = _spec("file.present", {"paths": ["/etc/nothing"]})
    base = _rule("T001", "file.present", paths=["/etc/flag"])
    exempt = Rule(
        **{**base.__dict__, "check": _spec("file.present", {"paths": ["/etc/flag"]}, unless=(cluster,))}
    )
    gated = Rule(
        **{
            **base.__dict__,
            "id": "T002",
            "check": _spec("file.present", {"paths": ["/etc/flag"]}, when=(absent,)),
        }
    )
    report = _audit(root, exempt, gated)
    assert [(r.outcome, r.reason.split(":")[0]) for r in report.rules] == [
        (Outcome.PASS, "exempt"),
        (Outcome.NOT_APPLICABLE, "condition not met"),
    ]


def test_findings_beyond_the_cap_are_counted(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "img", {f"/etc/f{i:03d}": "" for i in range(130)})
    report = _audit(root, _rule("T001", "file.present", paths=["/etc/f*"]))
    assert len(report.findings) == 100 and report.rules[0].omitted == 30 and report.rules[0].findings == 130


def test_non_utf8_rule_pack_is_refused_with_its_line(tmp_path: Path) -> None:
    pack = tmp_path / "latin1.yaml"
    pack.write_bytes(b"rules:\n  # caf\xe9\n")
    proc = run_cli("rules", "validate", str(pack))
    assert (
        proc.returncode == 2
        and proc.stderr == f"imagelint: error: {pack}:2: is not valid UTF-8 (byte offset 14)\n"
    )
