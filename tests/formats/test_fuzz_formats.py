"""Property tests: every output format on reports whose every string is hostile (tests/formats/fuzzing.py).

Deterministic (``derandomize=True``) and sized for ``make test``; ``benchmarks/fuzz_formats.py`` runs
the same strategies and checks for as many cases as you like.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagelint.report import Report
from tests.formats.fuzzing import check_all, expected_annotations, reports

_SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.mark.slow
@settings(max_examples=500, **_SETTINGS)  # type: ignore[arg-type]
@given(reports(max_findings=6), st.booleans())
def test_every_format_on_hostile_reports(report: Report, show_waived: bool) -> None:
    outputs = check_all(report, show_waived=show_waived)
    assert outputs["github"].count("\n") == expected_annotations(report)


@settings(max_examples=80, **_SETTINGS)  # type: ignore[arg-type]
@given(reports(max_findings=14))
def test_sarif_schema_and_rendered_markdown_on_hostile_reports(report: Report) -> None:
    """The slow oracles on fewer cases: the SARIF 2.1.0 schema, Markdown rendered as GitHub does."""
    check_all(report, deep=True)
