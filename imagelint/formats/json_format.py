"""JSON output: ``Report.to_dict()``, described by the schema ``imagelint schema report`` prints.

Always valid UTF-8 JSON: strings from the image are in the report's representation (see
``imagelint.report.escape``), and characters a terminal would act on are written as ``\\uXXXX``
escapes, so the same JSON value is safe to print to a CI log.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from imagelint.formats.interface import DIFF, REPORT, UNITS, RenderOptions
from imagelint.report import Report
from imagelint.report.escape import json_text

if TYPE_CHECKING:
    from imagelint.diff.result import DiffResult
    from imagelint.formats.interface import UnitsListing


class JsonFormatter:
    name = "json"
    documents = (REPORT, DIFF, UNITS)

    def render(self, report: Report, options: RenderOptions) -> str:
        return json_text(report.to_dict(), indent=2) + "\n"

    def render_diff(self, result: DiffResult, options: RenderOptions) -> str:
        """The schema ``imagelint schema diff`` prints."""
        return json_text(result.to_dict(), indent=2) + "\n"

    def render_units(self, listing: UnitsListing, options: RenderOptions) -> str:
        """The schema ``imagelint schema units`` prints."""
        from imagelint.formats.units_json import write_units_json

        out = io.StringIO()
        write_units_json(listing, out)
        return out.getvalue()


FORMATTER = JsonFormatter()
