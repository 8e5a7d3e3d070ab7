"""JSON output: ``Report.to_dict()``, described by the schema ``imagelint schema report`` prints."""

from __future__ import annotations

import json

from imagelint.formats.interface import RenderOptions
from imagelint.report import Report


class JsonFormatter:
    name = "json"

    def render(self, report: Report, options: RenderOptions) -> str:
        return json.dumps(report.to_dict(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


FORMATTER = JsonFormatter()
