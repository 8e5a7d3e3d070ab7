"""A self-contained HTML report (``--format html``): one file to keep as a CI artifact and open anywhere.

Nothing is loaded from elsewhere: no script at all, no stylesheet, font or image but the inline ones,
and a Content-Security-Policy that forbids anything else, so the page reads the same offline. In order:
the verdict and counts, the findings, what could not be checked; after a soak its charts as inline
SVG drawn here (a line per series, bars for the units that restarted most; data from
:mod:`imagelint.formats.charts`, downsampled the same way), for a fleet a bar chart of its outliers and
a row per host; the inventory's summary; the notes.

Every string from the report is escaped for HTML (``html.escape`` with quotes, after
:func:`imagelint.report.escape.visible` made control and invisible characters visible), in text and
in SVG ``<text>`` alike; numbers and words are ours.
"""

from __future__ import annotations

from html import escape

from imagelint.formats import charts
from imagelint.formats.interface import REPORT, RenderOptions
from imagelint.formats.presentation import gate_words
from imagelint.formats.wording import summary_line
from imagelint.report import Finding, Report
from imagelint.report.escape import neutralise_commands, visible

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;
vertical-align:top}code{font-family:monospace;word-break:break-all}.pass{color:#1a7f37}.fail{color:#cf222e}
.inconclusive{color:#9a6700}svg{display:block;margin:.5em 0}svg text{font:11px sans-serif;fill:#333}
.sev-critical{background:#cf222e;color:#fff;font-weight:bold}.sev-high{color:#cf222e;font-weight:bold}
.sev-medium{color:#9a6700}.sev-low{color:#0969da}.sev-info{color:#6e7781}
"""
_POLICY = "default-src 'none'; style-src 'unsafe-inline'"  # nothing but this page's own style
_W, _H, _PAD = 640, 180, 44  # chart size and margin, in px


def text(value: object) -> str:
    """One string from the report, for HTML text or a quoted attribute (trimmed, as a Markdown cell is)."""
    return escape(visible(str(value).strip()), quote=True)


def _finding_row(f: Finding) -> str:
    where = f.location + (f" (unit {f.unit})" if f.unit else "")
    if f.waiver is not None:
        last = f"{f.waiver.get('reason', '')} (expires {f.waiver.get('expires') or 'never'})"
        cells = [f.rule_id, where, f.message, last]
    else:
        cells = [f.rule_id, where, f.message, gate_words(f), f.remediation]
    severity = f'<td class="sev-{f.severity.value}">{f.severity.value}</td>'
    return "<tr>" + severity + "".join(f"<td>{text(c)}</td>" for c in cells) + "</tr>"


def _table(head: list[str], rows: list[str]) -> list[str]:
    """A table of ``rows`` (HTML already), under a row of ``head`` words (ours) when there are any."""
    heading = ["<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"] if head else []
    return ["<table>", *heading, *rows, "</table>"]


def line_svg(series: charts.Series) -> str:
    """``series`` as a small line chart: axes with min and max, the title and how it was sampled."""
    low, high = min(series.values), max(series.values)
    span = (high - low) or 1.0
    t0, t1 = series.times[0], series.times[-1]
    width = (t1 - t0) or 1.0

    def x(t: float) -> float:
        return _PAD + (min(max(t, t0), t1) - t0) / width * (_W - 2 * _PAD)

    shade: list[str] = []
    if series.marked:  # the hot-core episode, shaded behind the line
        left, right = (x(t) for t in series.marked)
        shade = [
            f'<rect x="{left:.1f}" y="{_PAD}" width="{max(right - left, 1):.1f}" height="{_H - 2 * _PAD}" '
            'fill="#cf222e" fill-opacity="0.12"/>'
        ]

    def y(v: float) -> float:
        return _H / 2 if high == low else _H - _PAD - (v - low) / span * (_H - 2 * _PAD)

    points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(series.times, series.values, strict=True))
    # a flat line: drawn midway, its one value labelled once (not as both the top and the bottom)
    levels = [(high, _PAD), (low, _H - _PAD)] if high != low else [(high, _H / 2)]
    return _svg(
        charts.headline(series),
        [
            f'<text x="8" y="30" style="fill:#666">{text(series.sampling)}</text>',
            *shade,
            f'<polyline fill="none" stroke="#cf222e" stroke-width="1.5" points="{points}"/>',
            *(
                f'<text x="{_PAD - 4}" y="{at:g}" text-anchor="end">{charts.number(value)}</text>'
                for value, at in levels
            ),
            f'<text x="{_PAD}" y="{_H - _PAD + 14}">{charts.number(t0)} s</text>',
            f'<text x="{_W - _PAD}" y="{_H - _PAD + 14}" text-anchor="end">{charts.number(t1)} s</text>',
        ],
    )


def bars_svg(bars: charts.Bars) -> str:
    """``bars`` as a small horizontal bar chart, each bar labelled with its (escaped) name and count."""
    high = max(bars.values) or 1.0
    row = 18
    parts: list[str] = []
    for i, (label, value) in enumerate(zip(bars.labels, bars.values, strict=True)):
        y = _PAD / 2 + 8 + i * row
        length = value / high * (_W / 2 - 60)
        parts += [
            f'<text x="{_W / 2 - 6}" y="{y + 12}" text-anchor="end">{text(label)}</text>',
            f'<rect x="{_W / 2}" y="{y + 2}" width="{length:.1f}" height="{row - 4}" fill="#0969da"/>',
            f'<text x="{_W / 2 + length + 4:.1f}" y="{y + 12}">{charts.number(value)}</text>',
        ]
    title = "; ".join(filter(None, [f"{bars.title} ({bars.unit})", bars.sampling]))
    return _svg(title, parts, height=int(_PAD / 2 + 16 + len(bars.labels) * row))


def _svg(title: str, parts: list[str], height: int = _H) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" role="img" '
            f'aria-label="{text(title)}">',
            f'<rect width="{_W}" height="{height}" fill="#fafafa" stroke="#ddd"/>',
            f'<text x="8" y="16" style="font-weight:bold">{text(title)}</text>',
            *parts,
            "</svg>",
        ]
    )


def _inventory(report: Report) -> list[str]:
    """The inventory in a few rows: the system, how many units and packages, and whether it is whole."""
    inv = report.inventory or {}
    if not inv:
        return []
    release, units, packages = (inv.get(k) for k in ("os_release", "units", "packages"))
    release = release if isinstance(release, dict) else {}
    packages = packages if isinstance(packages, dict) else {}
    rows = [
        ("system", release.get("PRETTY_NAME") or release.get("ID") or "-"),
        ("units", len(units) if isinstance(units, dict) else "-"),
        ("packages", f"{packages.get('count', '-')} ({packages.get('manager') or 'no package database'})"),
        ("default target", inv.get("default_target") or "-"),
        ("complete", "yes" if inv.get("complete") else "no"),
        ("problems", len(inv.get("problems") or [])),
    ]
    body = [f"<tr><th>{k}</th><td>{text(v)}</td></tr>" for k, v in rows]
    return ["<h2>Inventory</h2>", *_table([], body)]


def _pictures(report: Report) -> list[str]:
    out: list[str] = []
    series = charts.soak_series(report)
    restarts = charts.restart_bars(report)
    if series or restarts:
        out += ["<h2>Soak</h2>", *(line_svg(s) for s in series)]
        out += [bars_svg(restarts)] if restarts else []
    hosts = charts.fleet_hosts(report)
    if hosts:
        out += [f"<h2>Fleet ({len(hosts)} hosts)</h2>"]
        outliers = charts.fleet_outliers(hosts)
        out += [bars_svg(outliers)] if outliers else []
        rows = [
            f"<tr><td><code>{text(h.instance)}</code></td><td>{text(h.verdict)}</td><td>{h.failing}</td>"
            f"<td>{h.findings}</td><td>{h.errors}</td><td>{text(h.status)}</td></tr>"
            for h in hosts
        ]
        out += _table(["host", "verdict", "failing", "findings", "errors", "status"], rows)
    return out


def render_html(report: Report) -> str:
    verdict = report.verdict.value
    body = [
        f'<h1>imagelint: <span class="{verdict}">{verdict.upper()}</span></h1>',
        f"<p><code>{text(report.target.get('kind', ''))} {text(report.target.get('path', ''))}</code> · "
        f"imagelint {text(report.tool_version)} · fail-on <strong>{report.fail_on.value}</strong></p>",
        f"<p>{text(summary_line(report))}</p>",
        "<h2>Findings</h2>",
    ]
    active = sorted(report.active_findings, key=lambda f: (not f.failing, -f.severity.rank, f.rule_id))
    if active:
        body += _table(
            ["severity", "rule", "in the image", "finding", "gate", "remediation"],
            [_finding_row(f) for f in active],
        )
    else:
        body.append("<p>No findings.</p>")
    waived = sorted((f for f in report.findings if f.waiver is not None), key=lambda f: f.rule_id)
    if waived:
        body += ["<h2>Waived</h2>"]
        body += _table(
            ["severity", "rule", "in the image", "finding", "waiver"], [_finding_row(f) for f in waived]
        )
    problems = [str(e) for e in report.errors] + [f"warning: {w}" for w in report.warnings]
    if problems:
        body += [
            "<h2>Could not check everything</h2>",
            "<ul>",
            *(f"<li>{text(p)}</li>" for p in problems),
            "</ul>",
        ]
    body += _pictures(report) + _inventory(report)
    if report.notes:
        body += ["<h2>Notes</h2>", "<ul>", *(f"<li>{text(n)}</li>" for n in report.notes), "</ul>"]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
            f"<title>imagelint {verdict}</title><style>{_STYLE}</style></head><body>",
            *body,
            "</body></html>",
            "",
        ]
    )


class HtmlFormatter:
    name = "html"
    documents = (REPORT,)

    def render(self, report: Report, options: RenderOptions) -> str:
        # every string is escaped already; this guards the log if the file is printed in CI
        return neutralise_commands(render_html(report), colon="&#58;", bracket="&#91;")


FORMATTER = HtmlFormatter()
