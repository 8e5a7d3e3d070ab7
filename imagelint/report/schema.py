"""The published JSON Schema of the JSON report (kept as a JSON file beside this module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def report_schema() -> dict[str, Any]:
    return json.loads((Path(__file__).parent / "schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]
