"""The test helpers' own contracts: a test that must run alone says so with the ``serial`` mark."""

from __future__ import annotations

import pytest

from tests.soak.memcg import need_v1_memory
from tests.support import must_run_alone


def test_a_test_without_the_serial_mark_may_not_run_a_machine_wide_measurement() -> None:
    message = r"a pinned load, it must not run beside other tests: mark the test @pytest.mark.serial"
    with pytest.raises(pytest.fail.Exception, match=message):
        must_run_alone("a pinned load")


@pytest.mark.serial
def test_a_serial_test_may(request: pytest.FixtureRequest) -> None:
    must_run_alone("a pinned load")
    # and under pytest-xdist's loadgroup it shares one group with every other serial test
    assert request.node.get_closest_marker("xdist_group").args == ("serial",)


def test_a_test_that_makes_v1_memory_cgroups_carries_the_mark_a_v2_only_machine_deselects() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"mark the test @pytest.mark.cgroup_v1"):
        need_v1_memory()
