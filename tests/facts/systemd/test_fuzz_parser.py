"""Fuzzing the unit-file parser: no input makes it raise, break a promise, or take long.

The inputs and the property are in :mod:`tests.facts.systemd.fuzzing` (``benchmarks/fuzz_units.py`` runs
the same for as many cases as asked). Here, a few thousand deterministic cases: hypothesis-driven
arbitrary bytes and generated cases (derandomized, no example database), a fixed run of seeded
cases, the pathological continuation chain, and generated files against real ``systemctl``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagelint.facts.systemd import parse_unit_bytes
from tests.facts.systemd.fuzzing import (
    SLOW_FOR_SYSTEMCTL,
    check_case,
    load_corpus,
    make_case,
    signature,
    systemctl_mismatches,
)
from tests.facts.systemd.oracle import systemctl_available
from tests.support import need

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def corpus(debian_rootfs: Path) -> list[bytes]:
    found = load_corpus(debian_rootfs)
    assert len(found) > 100  # the real image's unit files are there to be mutated
    return found


@settings(FUZZ, max_examples=1000)
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes(data: bytes) -> None:
    check_case(data)


@settings(FUZZ, max_examples=400)
@given(
    lines=st.lists(
        st.one_of(
            st.sampled_from(
                [b"[Unit]", b"[Service", b"# c \\", b"K=v \\", b"\\", b"=x", b"\xef\xbb\xbf[Install]"]
            ),
            st.binary(max_size=40),
        ),
        max_size=30,
    ),
    end=st.sampled_from([b"\n", b"\r\n", b"\r", b"\0"]),
)
def test_assembled_lines(lines: list[bytes], end: bytes) -> None:
    check_case(end.join(lines))


def test_generated_cases(corpus: list[bytes]) -> None:
    @settings(FUZZ, max_examples=1000)
    @given(seed=st.integers(min_value=0, max_value=2**64))
    def run(seed: int) -> None:
        check_case(make_case(random.Random(seed), corpus).data)

    run()


def test_seeded_cases(corpus: list[bytes]) -> None:
    crashes: dict[str, str] = {}
    slowest = 0.0
    for index in range(2000):
        case = make_case(random.Random(f"suite:{index}"), corpus)
        try:
            slowest = max(slowest, check_case(case.data))
        except Exception as exc:
            crashes.setdefault(signature(exc), f"case {index} ({case.kind}): {exc}")
    assert crashes == {}, "\n".join(f"{sig}: {where}" for sig, where in crashes.items())
    print(f"2000 seeded cases, slowest {slowest * 1000:.0f} ms")


@pytest.mark.serial
def test_continuation_chain_is_linear() -> None:
    """600,000 continued pieces (a 1.8 MB file) parse in well under a second; this was quadratic
    (minutes). Serial: a time bound means nothing beside other tests loading the machine."""
    data = b"[Service]\nExecStart=/bin/x " + b"a\\\n" * 600_000
    started = time.perf_counter()
    parsed = parse_unit_bytes(data, "/x.service")
    assert time.perf_counter() - started < 5
    assert parsed.fatal is not None and "continued line" in parsed.fatal.message


def test_generated_files_against_systemctl(tmp_path: Path, corpus: list[bytes]) -> None:
    """Each generated case is a unit file of one tree: systemctl must give every one our state.

    Lines at the 1 MiB limit are left to test_long_lines.py: systemctl takes seconds on each
    (its continuation handling is quadratic)."""
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    cases = [make_case(random.Random(f"systemctl:{index}"), corpus) for index in range(1500)]
    cases = [case for case in cases if case.kind not in SLOW_FOR_SYSTEMCTL]
    mismatches = systemctl_mismatches(tmp_path, cases)
    assert mismatches == [], "\n".join(
        f"{cases[i].kind} {cases[i].data[:200]!r}: {why}" for i, why in mismatches
    )
