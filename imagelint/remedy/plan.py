"""From an audit's failing findings to the concrete steps that clear them, and what needs a person.

Each failing finding's rule names its fix actions (``fix:`` in the pack); ``{path}`` and ``{unit}``
become the finding's own, and every path is made canonical inside the image (links before its last
component resolved by the audit's resolver), so the script and ``--apply`` act on the same entries.
A finding whose rule declares no fix, only a ``manual`` action, or an action it cannot fill in (no
unit, a path that cannot be resolved) is listed as not fixable automatically, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field

from imagelint.errors import ImageReadError
from imagelint.facts.systemd import names
from imagelint.records import dataclass
from imagelint.report.model import Finding, Report
from imagelint.rulepacks.fixes import FixAction
from imagelint.rulepacks.model import Rule
from imagelint.targets.interface import Target

UNIT_ACTIONS = ("disable-unit", "mask-unit")


@dataclass(frozen=True)
class Step:
    """One concrete action: its type and its filled-in arguments."""

    action: str
    args: tuple[tuple[str, str], ...]

    def __getitem__(self, key: str) -> str:
        return dict(self.args)[key]

    def describe(self) -> str:
        return " ".join([self.action, *(f"{k}={v}" for k, v in self.args)])


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    clears: dict[Step, list[str]] = field(default_factory=dict)  # step -> the findings it clears
    manual: list[tuple[str, str]] = field(default_factory=list)  # (finding, why it needs a person)

    def add(self, step: Step, finding: str) -> None:
        if step not in self.clears:
            self.steps.append(step)
            self.clears[step] = []
        if finding not in self.clears[step]:
            self.clears[step].append(finding)


class _Unfillable(Exception):
    pass


def label(finding: Finding) -> str:
    return f"{finding.rule_id} {finding.unit or finding.location}"


def make_plan(report: Report, rules: Iterable[Rule], target: Target) -> Plan:
    """The steps for every failing finding of ``report`` (and every finding folded into one: IL206's
    endless loop is fixed by IL501's disable-unit), in the order of the findings."""
    by_id = {r.id: r for r in rules}
    plan = Plan()
    unfixed: list[tuple[Finding, str]] = []
    for finding in report.findings:
        if not (finding.failing or finding.part_of):  # a folded finding is what its carrier fails on
            continue
        rule = by_id.get(finding.rule_id)
        name = label(finding)
        if rule is None or not rule.fix:
            unfixed.append((finding, name))
            continue
        try:
            steps = [
                step
                for action in rule.fix
                if action.action != "manual" and (step := _filled(action, finding, target)) is not None
            ]
        except _Unfillable as exc:
            plan.manual.append((name, str(exc)))
            continue
        if not steps and not any(a.action == "manual" for a in rule.fix):
            plan.manual.append((name, f"its rule's fix names no action for {finding.path or 'it'}"))
        for step in steps:
            plan.add(step, name)
        plan.manual.extend((name, a["reason"]) for a in rule.fix if a.action == "manual")
    handled = {s["unit"]: s for s in plan.steps if s.action in UNIT_ACTIONS}
    for finding, name in unfixed:
        by_unit = handled.get(finding.unit or "")
        if by_unit is not None:  # a finding on a unit another rule's fix disables or masks
            plan.add(by_unit, f"{name} (its unit is {by_unit.action.removesuffix('-unit')}d)")
        else:
            plan.manual.append((name, f"its rule declares no machine fix: {finding.remediation.strip()}"))
    for result in report.rules:
        if result.omitted_failing:
            plan.manual.append(
                (
                    result.rule_id,
                    f"{result.omitted_failing} more failing finding(s) beyond the report's listing cap: "
                    "run imagelint fix again after this one",
                )
            )
    return plan


def _filled(action: FixAction, finding: Finding, target: Target) -> Step | None:
    """The action made concrete for ``finding``; None for a ``remove-matching`` of another directory."""
    if action.action == "remove-matching":
        return _matching(action["glob"], finding, target)
    args: list[tuple[str, str]] = []
    for key, value in action.args.items():
        for var, known in (("{path}", finding.path), ("{unit}", finding.unit)):
            if var in value:
                if not known:
                    raise _Unfillable(f"the finding names no {var[1:-1]} for {action.action}")
                value = value.replace(var, known)
        if key == "unit" and not names.is_valid(value):
            raise _Unfillable(f"{value!r} is not a valid unit name")
        if key == "path":
            value = _canonical(target, value)
        args.append((key, value))
    return Step(action.action, tuple(args))


def _matching(glob: str, finding: Finding, target: Target) -> Step | None:
    directory, _, pattern = glob.rpartition("/")
    if not finding.path:
        raise _Unfillable("the finding names no path for remove-matching")
    canonical = _canonical(target, directory)
    if canonical != _canonical(target, finding.path):
        return None
    return Step("remove-matching", (("path", canonical), ("match", pattern)))


def _canonical(target: Target, path: str) -> str:
    if not path.startswith("/") or "\x00" in path:
        raise _Unfillable(f"{path!r} is not an absolute image path")
    try:
        return target.resolve(path, follow_last=False)
    except ImageReadError as exc:
        raise _Unfillable(f"{path!r} cannot be resolved in the image: {exc.reason}") from None
