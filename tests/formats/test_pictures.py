"""The soak and the fleet as pictures: sparklines, Mermaid charts, the html format's SVG.

Snapshots (``tests/formats/snapshots/``, rewritten with ``IMAGELINT_UPDATE_SNAPSHOTS=1`` as in
``test_text_report.py``) pin the text and Markdown of an hour-long soak (downsampled) and of a
100-host fleet. The real renderers then draw them: the Mermaid CLI with Debian's Chromium renders
every Mermaid block of the Markdown to SVG (its text is checked) and to PNG (its pixels are checked),
and headless Chromium opens the html report (its DOM and a screenshot). The pictures are kept in
``build/test-artifacts/pictures/`` for a person, or CI, to look at. A hostile unit name is in every
one of them.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from imagelint.facts.cpurecord import CpuRecord
from imagelint.facts.cpustat import parse_proc_stat
from imagelint.facts.soak import SoakFacts
from imagelint.formats import RenderOptions, get_formatter
from imagelint.formats.charts import MAX_POINTS, downsample, for_mermaid, soak_series, sparkline
from imagelint.report import Finding, Verdict
from imagelint.report.escape import visible
from imagelint.rulepacks import Severity
from imagelint.soak.runner import run_soak
from tests.facts.cpustat_text import counters, proc_stat
from tests.formats import browsers
from tests.formats.fuzzing import FRAGMENTS, check_format
from tests.formats.pictures import HOSTILE_UNIT, fleet_report, soak_report
from tests.formats.test_text_report import check_snapshot
from tests.soak.test_walk_series import LAYOUT, Counting, _probe
from tests.support import REPO, need

ARTIFACTS = REPO / "build" / "test-artifacts" / "pictures"


def _render(fmt: str, report: object) -> str:
    return get_formatter(fmt).render(report, RenderOptions())  # type: ignore[arg-type]


# -- the data -----------------------------------------------------------------------------------------


def test_downsampling_keeps_every_peak_and_the_last_time() -> None:
    times = [float(i) for i in range(3600)]
    values = [0.0] * 3600
    values[1801] = 9.0  # one spike: a bucket mean would hide it, the bucket max keeps it
    t, v = downsample(times, values)
    assert len(v) == MAX_POINTS and max(v) == 9.0 and v.count(9.0) == 1 and t[-1] == 3599.0
    assert downsample(times[:10], values[:10]) == (times[:10], values[:10])


def test_soak_series_say_they_are_downsampled_and_mark_the_hot_core() -> None:
    series = {s.title: s for s in soak_series(soak_report())}
    dying = series["dying memory cgroups"]
    assert len(dying.values) == MAX_POINTS and dying.samples == 3600
    assert "downsampled from 3,600 samples (bucket max)" in dying.sampling
    kernel = series["cpu3 kernel time, the busiest CPU"]
    assert max(kernel.values) == 97 and kernel.note == "hot core cpu3 1200-1500 s at ≥ 90%"
    assert kernel.marked == (1200.0, 1500.0)


def test_sparkline_spans_the_blocks() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5]) == "▁▁" and sparkline([]) == ""


@pytest.mark.parametrize("label", [HOSTILE_UNIT, '"', "]", "%%{init: {}}%%", "a\nb", "```", "<br>", "#quot;"])
def test_a_mermaid_label_cannot_leave_its_quotes(label: str) -> None:
    escaped = for_mermaid(label)
    assert re.fullmatch(r"(?:[A-Za-z0-9 .,/_+-]|#\d+;)*", escaped), escaped


# -- snapshots ----------------------------------------------------------------------------------------


def test_long_soak_text_matches_snapshot() -> None:
    text = _render("text", soak_report())
    assert text.count("soak chart: ") == 4
    check_snapshot("soak-long.txt", text)


def test_long_soak_markdown_matches_snapshot() -> None:
    text = _render("markdown", soak_report(units=("ecs.service", HOSTILE_UNIT)))
    assert text.count("```mermaid") == 5
    check_snapshot("soak-long.md", text)


def test_fleet_of_100_hosts_markdown_matches_snapshot() -> None:
    markdown = _render("markdown", fleet_report(100))
    assert markdown.count("| <code>i-") == 100 and markdown.count("```mermaid") == 1
    check_snapshot("fleet-100.md", markdown)


def test_fleet_of_100_hosts_text_matches_snapshot() -> None:
    text = _render("text", fleet_report(100))
    assert text.count(": pass (") + text.count(": fail (") == 100 and "soak chart" not in text
    check_snapshot("fleet-100.txt", text)


def test_no_pictures_without_a_soak_or_a_fleet() -> None:
    report = soak_report()
    report.facts = {}
    assert "soak chart" not in _render("text", report) and "mermaid" not in _render("markdown", report)
    assert "<svg" not in _render("html", report)


# -- the real renderers -------------------------------------------------------------------------------


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    d = ARTIFACTS / request.node.name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def _mmdc() -> Path:
    need(browsers.CHROMIUM.exists(), "Debian's chromium is not installed (scripts/install.sh --test)")
    mmdc = browsers.mermaid_cli()
    need(mmdc is not None, "the Mermaid CLI could not be installed (npm missing or offline)")
    assert mmdc is not None
    return mmdc


def _svg_texts(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


@pytest.mark.slow
def test_mermaid_cli_draws_every_chart_of_the_soak_and_the_fleet(artifacts: Path, tmp_path: Path) -> None:
    mmdc = _mmdc()
    documents = {
        "soak": _render("markdown", soak_report(units=("ecs.service", HOSTILE_UNIT))),
        "fleet": _render("markdown", fleet_report(100)),
    }
    hostile_label = visible(HOSTILE_UNIT[:39]) + "…"
    for name, markdown in documents.items():
        source = artifacts / f"{name}.md"
        source.write_text(markdown, encoding="utf-8")
        blocks = markdown.count("```mermaid")
        for kind in ("svg", "png"):
            out = artifacts / f"{name}-{kind}.md"
            proc = browsers.render_mermaid(mmdc, source, out, tmp_path, kind)
            assert proc.returncode == 0, proc.stderr[-2000:]
            drawn = sorted(artifacts.glob(f"{name}-{kind}-*.{kind}"))
            assert len(drawn) == blocks, drawn
        texts = [
            _svg_texts(p.read_text(encoding="utf-8")) for p in sorted(artifacts.glob(f"{name}-svg-*.svg"))
        ]
        for png in artifacts.glob(f"{name}-png-*.png"):
            assert browsers.png_ink(png) > 0.01, f"{png} is blank"
        if name == "soak":
            dying = next(t for t in texts if "dying memory cgroups (memcgs)" in t)
            assert "seconds; 60 points, downsampled from 3,600 samples (bucket max)" in dying, dying
            hot = "cpu3 kernel time, the busiest CPU (%); hot core cpu3 1200-1500 s at ≥ 90%"
            assert any(hot in t for t in texts), texts
            restarts = next(t for t in texts if "restarts during the soak" in t)
            assert "ecs.service" in restarts and hostile_label in restarts, restarts
        else:
            (bars,) = texts
            assert "hosts with the most failing findings; 6 more not shown" in bars
            assert "i-0000000000000003f" in bars


def _hostile_html_report() -> object:
    report = soak_report(units=("ecs.service", HOSTILE_UNIT))
    report.verdict = Verdict.FAIL
    report.findings = [
        Finding(
            rule_id="IL201",
            rule_name="restart-loop",
            severity=Severity.HIGH,
            message=f"{HOSTILE_UNIT} restarted 40 times <script>alert(1)</script>",
            subject=HOSTILE_UNIT,
            remediation="Disable it.",
            path="/etc/systemd/system/<img src=x onerror=alert(1)>",
            unit=HOSTILE_UNIT,
            failing=True,
        )
    ]
    report.inventory = {  # the shape imagelint.facts.inventory writes
        "os_release": {"PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)"},
        "units": {HOSTILE_UNIT: {}, "ecs.service": {}},
        "packages": {"manager": "dpkg", "count": 212},
        "complete": True,
        "problems": [],
    }
    return report


def test_chromium_opens_the_html_report(artifacts: Path, tmp_path: Path) -> None:
    need(browsers.CHROMIUM.exists(), "Debian's chromium is not installed (scripts/install.sh --test)")
    page = artifacts / "report.html"
    page.write_text(_render("html", _hostile_html_report()), encoding="utf-8")
    assert "http://" not in page.read_text().replace("http://www.w3.org/2000/svg", "")
    dom = browsers.chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    (artifacts / "report.dom.html").write_text(dom.stdout, encoding="utf-8")
    assert dom.stdout.count("<svg") == 5 and dom.stdout.count("<script") == 0 and "<img" not in dom.stdout
    assert "<b>" not in dom.stdout  # the unit name's markup stayed text
    texts = _svg_texts(dom.stdout)
    assert visible(HOSTILE_UNIT[:39]) + "…" in texts and "ecs.service" in texts, texts
    assert "dying memory cgroups (memcgs)" in texts
    assert "60 points, downsampled from 3,600 samples (bucket max)" in texts
    assert dom.stdout.count('fill-opacity="0.12"') == 1  # the hot-core episode, shaded
    assert "<td>Debian GNU/Linux 12 (bookworm)</td>" in dom.stdout and "<td>212 (dpkg)</td>" in dom.stdout
    _screenshot(page, tmp_path)


def test_chromium_opens_the_html_report_of_a_fleet(artifacts: Path, tmp_path: Path) -> None:
    need(browsers.CHROMIUM.exists(), "Debian's chromium is not installed (scripts/install.sh --test)")
    page = artifacts / "fleet.html"
    page.write_text(_render("html", fleet_report(100)), encoding="utf-8")
    dom = browsers.chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 1 and dom.stdout.count("<tr><td><code>i-") == 100
    assert "hosts with the most failing findings (failing); 6 more not shown" in _svg_texts(dom.stdout)
    _screenshot(page, tmp_path)


def _screenshot(page: Path, work: Path) -> None:
    shot, console = browsers.screenshot(page, work)
    assert console == []  # no error, no refused load: the page renders as it is
    assert browsers.png_ink(shot) > 0.02, f"{shot} is blank"


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_hostile_host_rows_stay_text(fmt: str) -> None:
    """A fleet's rows through the fuzz test's checks (its reports carry soaks, not fleets)."""
    report = fleet_report(8)
    for n, row in enumerate(report.facts["instances"]):
        row["instance_id"] = FRAGMENTS[(5 * n) % len(FRAGMENTS)] + HOSTILE_UNIT
        row["status"] = FRAGMENTS[(7 * n + 3) % len(FRAGMENTS)]
    output = check_format(fmt, report, deep=True)
    if fmt != "text":
        assert output.count("x.service") >= 8  # every row is there, escaped


def test_the_charts_read_what_a_real_soak_records() -> None:
    """A soak run by the real loop, with a hot cpu0 in its /proc/stat reads, recorded as the session
    records it (``facts["soak"] = SoakFacts.to_dict()``): every series is found, the hot core named."""
    sampler = Counting()
    result = run_soak(sampler, duration=0.3, interval=0.05, restarts=None, probe=lambda: _probe(0.002))
    record = CpuRecord(0.1, 0.0, reads=51, cpu_seconds=0.0051)
    values = {0: counters(), 1: counters()}
    prev = parse_proc_stat(proc_stat(values))
    for i in range(50):
        values = {0: counters(system=10 * (i + 1)), 1: counters(idle=10 * (i + 1))}
        cur = parse_proc_stat(proc_stat(values))
        record.add(prev, cur, 0.1 * i, 0.1 * (i + 1))
        prev = cur
    report = soak_report()
    report.facts = {"soak": SoakFacts(result, LAYOUT, _probe(0.001), _probe(0.003), cpu=record).to_dict()}
    series = {s.title: s for s in soak_series(report)}
    assert list(series) == [
        "dying memory cgroups",
        "live memory cgroups",
        "cpu0 kernel time, the busiest CPU",
        "memory.stat walk",
    ]
    assert series["dying memory cgroups"].values == [float(i) for i in range(1, len(result.samples) + 1)]
    assert max(series["cpu0 kernel time, the busiest CPU"].values) == 100
    assert series["cpu0 kernel time, the busiest CPU"].note.startswith("hot core cpu0 ")
    assert series["memory.stat walk"].values[0] == 1.0 and series["memory.stat walk"].values[-1] == 3.0


def test_the_step_summary_has_the_charts(tmp_path: Path) -> None:
    from imagelint.formats.github import write_step_summary

    summary = tmp_path / "summary.md"
    write_step_summary(soak_report(), summary)
    assert summary.read_text(encoding="utf-8").count("```mermaid") == 5


def test_the_sparklines_are_on_a_terminal_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    table = get_formatter("text").render(soak_report(), RenderOptions(terminal=True))
    assert table.count("soak chart: ") == 4 and "▁▁▁▁▁█████▁▁▁" in table


def test_a_line_of_whole_counts_gets_whole_ticks() -> None:
    from imagelint.formats.charts import _y_range

    assert _y_range("line", [112.0, 112.0, 113.0]) == " 112 --> 122"  # ten apart: d3's ticks are whole
    assert _y_range("line", [195.0, 6921.0]) == " 195 --> 6921"
    assert _y_range("line", [0.5, 1.25]) == ""  # fractions: Mermaid's own range
    assert _y_range("bar", [3.0, 7.0]) == " 0 --> 7"
