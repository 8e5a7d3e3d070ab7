"""Property tests of the cache readers (rule packs, audits, EBS blocks and listings): any entry
planted in the cache directory is a miss and the source is read; any payload under the user's own
key is read or missed without an exception; a genuine entry is a hit. Never a hang.

The generators and the property live in ``tests/cache_fuzzing.py``, shared with the long run in
``benchmarks/fuzz_caches.py``. Hypothesis draws each case's seed (deterministic, ~600 cases).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cache_fuzzing import GENERATORS, READERS, Case, check_case, make_case

FUZZ = settings(
    derandomize=True,
    deadline=None,  # bounded by check_case's own alarm
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize(("way", "examples"), [("planted", 300), ("authenticated", 200), ("genuine", 20)])
def test_every_entry_is_a_miss_or_read_never_an_error(way: str, examples: int, tmp_path: Path) -> None:
    @settings(FUZZ, max_examples=examples)
    @given(seed=st.integers(0, 2**64))
    def run(seed: int) -> None:
        outcome = check_case(GENERATORS[way](random.Random(seed)), tmp_path)
        assert outcome == "hit" if way == "genuine" else outcome in ("hit", "miss")

    run()


def test_the_mix_the_benchmark_runs(tmp_path: Path) -> None:
    outcomes: Counter[tuple[str, str, str]] = Counter()
    for seed in range(120):
        case = make_case(random.Random(seed))
        outcomes[case.reader, case.way, check_case(case, tmp_path)] += 1
    for reader in READERS:
        assert outcomes[reader, "planted", "hit"] == 0
        assert outcomes[reader, "planted", "miss"] > 0, outcomes
    assert sum(n for (_, way, result), n in outcomes.items() if way == "genuine" and result == "hit") > 0


def test_a_believed_planted_entry_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The property can fail: with authentication turned off, a planted block is believed."""
    from imagelint import cachefiles
    from tests.cache_fuzzing import CacheProblem

    monkeypatch.setattr(cachefiles.hmac, "compare_digest", lambda a, b: True)
    caught = 0
    for seed in range(40):
        try:
            check_case(Case("listing", "planted", seed), tmp_path)
        except CacheProblem:
            caught += 1
    assert caught > 0
