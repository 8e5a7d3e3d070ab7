"""Property tests of the journal reader on mutated real journals (hypothesis).

For every input: nothing but the documented ``JournalError`` types escapes the public reading API
(in practice nothing at all: problems are recorded in the scan), reading ends within a time bound,
and the process's peak RSS grows by a bounded amount. Inputs are real journals written by
systemd-journal-remote in each layout (plus XZ and LZ4 re-encodings), mutated by
``tests/facts/journal/mutate.py`` (the same mutator ``benchmarks/fuzz_journal.py`` runs at scale).

Deterministic: ``derandomize=True`` and no example database. About 3,000 cases in all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagelint.facts.journal import JournalError
from tests.facts.journal.conftest import have_tools
from tests.facts.journal.mutate import (
    OPS,
    U64,
    Base,
    Mutation,
    Timeout,
    apply,
    base_journals,
    read_all,
    signature,
)

CASES_PER_BASE = 500  # five bases: 2,500 cases, plus the focused properties below
TIME_BOUND_S = 5.0
GROWTH_BOUND_KIB = 128 * 1024

_BASES: dict[str, Base] = {}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Base]:
    have_tools()
    if not _BASES:
        _BASES.update((b.name, b) for b in base_journals(tmp_path_factory.mktemp("fuzz")))
    return _BASES


mutation = st.tuples(st.sampled_from(OPS), st.integers(0, U64), st.integers(0, U64), st.integers(0, U64))
mutations = st.lists(mutation, min_size=1, max_size=4)
SETTINGS = settings(
    max_examples=CASES_PER_BASE,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check(
    base: Base, muts: list[Mutation], *, merged: bool = False, cut: tuple[int, int] | None = None
) -> None:
    data = apply(base, muts)
    try:
        outcome = read_all(data, companion=base.data if merged else None, seconds=TIME_BOUND_S, cut=cut)
    except JournalError:
        return  # documented; the CLI maps it to exit 3 with one line
    except Timeout:
        pytest.fail(f"reading took more than {TIME_BOUND_S} s: base={base.name} mutations={muts}")
    except Exception as exc:
        raise AssertionError(f"{signature(exc)}: base={base.name} mutations={muts}") from exc
    assert outcome.peak_growth_kib < GROWTH_BOUND_KIB, (base.name, muts, outcome)
    assert len(outcome.statuses) == (2 if merged else 1)
    if merged:
        assert outcome.statuses[1] == "read", ("the pristine copy is read in full", base.name, muts, outcome)


def test_the_bases_read_in_full(bases: dict[str, Base]) -> None:
    """Every path reads each unmutated base in full, alone and merged with a copy of itself (so the
    XZ and LZ4 re-encodings keep hash chains and field lists as writers make them)."""
    for base in bases.values():
        outcome = read_all(base.data)
        assert outcome.statuses == ["read"] and outcome.entries > 100, (base.name, outcome)
        outcome = read_all(base.data, companion=base.data)
        assert outcome.statuses == ["read", "read"], (base.name, outcome)


@pytest.mark.parametrize("layout", ["keyed", "legacy", "plain", "keyed-xz", "legacy-lz4"])
@SETTINGS
@given(muts=mutations, merged=st.booleans())
def test_mutated_journals(bases: dict[str, Base], layout: str, muts: list[Mutation], merged: bool) -> None:
    check(bases[layout], muts, merged=merged)


HEADER_OPS = ("state", "header_count", "header_offset", "flags", "truncate")


@settings(SETTINGS, max_examples=300)
@given(
    layout=st.sampled_from(["keyed", "legacy"]),
    muts=st.lists(
        st.tuples(st.sampled_from(HEADER_OPS), st.integers(0, U64), st.integers(0, U64), st.integers(0, U64)),
        min_size=1,
        max_size=3,
    ),
)
def test_lying_headers(bases: dict[str, Base], layout: str, muts: list[Mutation]) -> None:
    """Online state, huge counts and offsets, unknown flags, truncation: the header is the first lie."""
    check(bases[layout], muts)


@settings(SETTINGS, max_examples=200)
@given(
    layout=st.sampled_from(["keyed", "keyed-xz", "legacy-lz4"]),
    muts=st.lists(
        st.tuples(st.just("payload"), st.integers(0, U64), st.integers(0, U64), st.integers(0, U64)),
        min_size=1,
        max_size=3,
    ),
)
def test_hostile_payloads(bases: dict[str, Base], layout: str, muts: list[Mutation]) -> None:
    """Compressed payloads damaged or replaced by small bombs (24 MiB of zeros, past the cap)."""
    check(bases[layout], muts)


@settings(SETTINGS, max_examples=300)
@given(
    layout=st.sampled_from(["keyed", "legacy", "plain", "keyed-xz", "legacy-lz4"]),
    muts=st.lists(mutation, max_size=2),
    after=st.integers(0, 200),
    size=st.floats(0, 1),
    merged=st.booleans(),
)
def test_cut_while_read(
    bases: dict[str, Base], layout: str, muts: list[Mutation], after: int, size: float, merged: bool
) -> None:
    """The file (mutated or not) truncated under the reader after ``after`` entries: every read past
    the new end is a problem on the file, never a crash (positioned reads, no mapping)."""
    base = bases[layout]
    check(base, muts, merged=merged, cut=(after, int(size * len(base.data))))


def test_a_file_cut_while_read_is_read_in_part(bases: dict[str, Base]) -> None:
    """A small file is read from the pages cached before the cut: it is still not read in full."""
    outcome = read_all(bases["keyed"].data, cut=(10, 4096))
    assert outcome.statuses == ["partial"] and "shrank" in (outcome.reasons[0] or ""), outcome


def test_unmutated_bases_are_sound(bases: dict[str, Base], tmp_path: Path) -> None:
    """Sanity of the craft: the shrunk bases pass ``journalctl --verify``, and the XZ and LZ4
    re-encodings read in journalctl exactly as the files they were made from."""
    import subprocess

    from tests.facts.journal.conftest import JOURNALCTL, journalctl_json

    files = {}
    for base in bases.values():
        files[base.name] = f = tmp_path / f"{base.name}.journal"
        f.write_bytes(base.data)
    for name in ("keyed", "legacy", "plain"):
        proc = subprocess.run(
            [JOURNALCTL or "journalctl", "--verify", f"--file={files[name]}"], capture_output=True
        )
        assert proc.returncode == 0, (name, proc.stderr)
    for copy, original in (("keyed-xz", "keyed"), ("legacy-lz4", "legacy")):
        assert journalctl_json(f"--file={files[copy]}") == journalctl_json(f"--file={files[original]}")


# -- crashes the fuzzer found (benchmarks/fuzz_journal.py), each kept as a regression test ----------


def _restart_journal(tmp_path: Path, n_restarts: str = "3") -> Path:
    from tests.facts.journal.exportgen import Host, write_journal

    host = Host(41)
    host.new_boot(1_737_000_000_000_000)
    export = b"".join(host.crash_cycle("ecs.service", "amazon-ecs-agent", 1))
    export = export.replace(b"N_RESTARTS=1\n", b"N_RESTARTS=" + n_restarts.encode() + b"\n")
    export += b"".join(host.crash_cycle("ecs.service", "amazon-ecs-agent", 2))
    write_journal(export, tmp_path)
    return tmp_path


def test_impossible_realtime_of_a_restart_record(tmp_path: Path) -> None:
    """``ValueError: year … is out of range`` formatting the evidence of a restart whose entry header
    carries a realtime stamp no writer makes (found as: noise over an ENTRY object)."""
    from imagelint.checks.journal import _unit_evidence
    from imagelint.facts.journal import FileStatus, analyze_restarts, open_directory
    from tests.facts.journal.craft import JournalBytes
    from tests.facts.journal.exportgen import MACHINE_ID, RESTART_ID

    have_tools()
    d = _restart_journal(tmp_path)
    (f,) = (d / MACHINE_ID).glob("*.journal")
    jb = JournalBytes(f.read_bytes())
    restart = next(
        off
        for off in jb.entry_offsets()
        if any(
            jb.data_payload(item).startswith(b"MESSAGE_ID=" + RESTART_ID.encode())
            for _p, item in jb.entry_items(off)
        )
    )
    jb.data[restart + 24 : restart + 32] = (1 << 60).to_bytes(8, "little")
    f.write_bytes(bytes(jb))
    with open_directory(d) as j:
        report = analyze_restarts(j)
        for rec in report.units:
            _unit_evidence(rec)
        (r,) = j.scan.files
    assert r.status is FileStatus.PARTIAL and "impossible realtime" in (r.reason or "")
    assert [u.restarts for u in report.units if u.unit == "ecs.service"] == [1]


def test_a_restart_counter_that_is_not_ascii_digits(tmp_path: Path) -> None:
    """``ValueError: invalid literal for int()``: ``"²".isdigit()`` is true (found by the ``value`` op)."""
    from imagelint.facts.journal import FileStatus, analyze_restarts, open_directory

    have_tools()
    d = _restart_journal(tmp_path, "²")
    with open_directory(d) as j:
        report = analyze_restarts(j)
        (r,) = j.scan.files
    (rec,) = [u for u in report.units if u.unit == "ecs.service"]
    assert rec.restarts == 2 and rec.max_n_restarts == 2 and r.status is FileStatus.READ
