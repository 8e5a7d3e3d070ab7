"""Parameters several kinds share."""

from __future__ import annotations

from imagelint.checks.params import UnitSelection, build


def test_unit_selection_applies_units_and_exclusions() -> None:
    params = build(UnitSelection, {"units": ["ecs*"], "exclude_units": ["ecs-init.service"]})
    assert params.selects("ecs.service")
    assert not params.selects("ecs-init.service")
    assert not params.selects("sshd.service")
    assert UnitSelection().selects("anything.service")
