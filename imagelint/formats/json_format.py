"""JSON output: ``Report.to_dict()``, described by the schema ``imagelint schema report`` prints."""

from __future__ import annotations

import json

from imagelint.report import Report


class JsonFormatter:
    name = "json"

    def render(self, report: Report, *, color: bool, show_waived: bool) -> str:
        return json.dumps(report.to_dict(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


FORMATTER = JsonFormatter()
