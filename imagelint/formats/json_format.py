"""JSON output: ``Report.to_dict()``, described by the schema ``imagelint schema report`` prints.

Always valid UTF-8 JSON: strings from the image are in the report's representation (see
``imagelint.report.escape``), and characters a terminal would act on are written as ``\\uXXXX``
escapes, so the same JSON value is safe to print to a CI log.
"""

from __future__ import annotations

from imagelint.formats.interface import RenderOptions
from imagelint.report import Report
from imagelint.report.escape import json_text


class JsonFormatter:
    name = "json"

    def render(self, report: Report, options: RenderOptions) -> str:
        return json_text(report.to_dict(), indent=2) + "\n"


FORMATTER = JsonFormatter()
