"""Property tests: any YAML, any bytes, any mutation of the real packs and config loads or is refused
with one located line (exit 2), never a traceback, never a hang.

The generators and the property live in ``tests/rulepacks/fuzzing.py``, shared with the long run in
``benchmarks/fuzz_yaml.py``. Hypothesis draws the seed of each case (a failure names it; drawing
every choice through Hypothesis would be ten times slower). Deterministic (``derandomize=True``);
~2,400 cases.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rulepacks.fuzzing import GENERATORS, Case, check_case, make_case

FUZZ = settings(
    derandomize=True,
    deadline=None,  # time is bounded by check_case's own alarm
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
    database=None,
)


@pytest.mark.parametrize(
    ("origin", "examples"), [("document", 800), ("shaped", 300), ("bytes", 500), ("mutated", 400)]
)
def test_every_input_loads_or_is_refused_with_a_location(origin: str, examples: int, tmp_path: Path) -> None:
    @settings(FUZZ, max_examples=examples)
    @given(seed=st.integers(0, 2**64))
    def run(seed: int) -> None:
        kind, data = GENERATORS[origin](random.Random(seed))
        check_case(Case(kind, data, origin), tmp_path)

    run()


def test_the_mix_the_benchmark_runs(tmp_path: Path) -> None:
    outcomes = {"loaded": 0, "refused": 0}
    for seed in range(200):
        outcomes[check_case(make_case(random.Random(seed)), tmp_path)] += 1
    assert outcomes["refused"] > 0 and outcomes["loaded"] > 0, outcomes
