"""The HTML report reads as the terminal does: severities in their colours, the summary once, and the
waived findings listed apart with their waiver (they are in the summary's count, so they are shown)."""

from __future__ import annotations

import dataclasses

from imagelint.formats import RenderOptions, get_formatter
from imagelint.report import Outcome
from imagelint.rulepacks import Severity
from tests.formats.test_text_report import _finding, _report, _rule


def test_severity_colours_one_summary_and_a_waived_list() -> None:
    waived = dataclasses.replace(
        _finding("IL106", "/root/.bash_history", Severity.MEDIUM, failing=False),
        waiver={"reason": "a <test> image", "expires": "2027-01-01"},
    )
    report = _report(
        [_finding("IL109", "/etc/a", Severity.CRITICAL), waived],
        [_rule("IL109", Outcome.FAIL, Severity.CRITICAL), _rule("IL106", Outcome.WAIVED, Severity.MEDIUM)],
    )
    page = get_formatter("html").render(report, RenderOptions())
    assert '<td class="sev-critical">critical</td>' in page and ".sev-critical{" in page
    assert page.count("finding(s)") == 1  # the summary line, not again as a table of counts
    waived_part = page.split("<h2>Waived</h2>", 1)[1]
    assert '<td class="sev-medium">medium</td><td>IL106</td>' in waived_part
    assert "a &lt;test&gt; image (expires 2027-01-01)" in waived_part
    assert "IL106" not in page.split("<h2>Waived</h2>", 1)[0].split("<h2>Findings</h2>", 1)[1]


def test_a_flat_series_is_drawn_midway_and_labelled_once() -> None:
    from imagelint.formats.charts import Series
    from imagelint.formats.html import line_svg

    flat = line_svg(Series("live memcgs", "memcgs", [0.0, 5.0, 10.0], [246.0, 246.0, 246.0], 3))
    assert flat.count(">246</text>") == 1
    assert 'points="44.0,90.0' in flat  # _H / 2
    rising = line_svg(Series("live memcgs", "memcgs", [0.0, 10.0], [240.0, 246.0], 2))
    assert rising.count(">246</text>") == 1 and rising.count(">240</text>") == 1
