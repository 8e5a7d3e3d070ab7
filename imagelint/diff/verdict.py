"""The diff gate's one decision, in the verdict vocabulary of :mod:`imagelint.report.verdict`.

- :func:`change_action`: what one change does: ``fail``, ``warn``, ``note``, ``ignore`` (per the config's
  ``diff:`` section), or ``allowed`` (a unit in ``allow-units`` appearing). A new finding that does
  not fail NEW's own gate (below ``fail-on``, waived) is at most a warning.
- :func:`decide_diff`: fail if any change fails; else inconclusive if either side could not be
  read in full (its inventory is incomplete or its audit was inconclusive: a change may be hidden);
  else pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from imagelint.diff.policy import ALLOWABLE, DiffPolicy
from imagelint.report.model import Verdict

FAIL, WARN, IGNORE, ALLOWED = "fail", "warn", "ignore", "allowed"


def change_action(kind: str, policy: DiffPolicy, unit: str | None = None, *, failing: bool = True) -> str:
    action = policy.actions.get(kind, WARN)
    if action == IGNORE:
        return IGNORE
    if kind in ALLOWABLE and policy.allowed(unit):
        return ALLOWED
    if action == FAIL and not failing:
        return WARN
    return action


def decide_diff(actions: Iterable[str], *, complete: bool) -> Verdict:
    if any(a == FAIL for a in actions):
        return Verdict.FAIL
    if not complete:
        return Verdict.INCONCLUSIVE
    return Verdict.PASS
