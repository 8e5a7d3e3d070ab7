"""Reading a JSON report back: the file given as ``audit --baseline`` or as a side of ``imagelint diff``.

A report file is input like any other: read with a size cap, parsed, and checked against the
published schema (``imagelint schema report``) before any field is used. A file that is missing,
too large, not JSON or not a report is one line and exit 3 (the comparison could not be made on
data it did not see), naming the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from imagelint.errors import TargetError

MAX_REPORT_BYTES = 256 * 1024 * 1024


def looks_like_report(path: Path) -> bool:
    """A regular file (a report) rather than a directory (an image root): how a CLI argument is told."""
    return path.is_file()


def read_report_dict(path: Path) -> tuple[dict[str, Any], str]:
    """The report in ``path`` as its JSON dict, validated against the report schema, and the
    SHA-256 of the file."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise TargetError(f"report cannot be read: {exc.strerror}", where=str(path)) from None
    if len(data) > MAX_REPORT_BYTES:
        raise TargetError(f"report is larger than {MAX_REPORT_BYTES // 2**20} MiB", where=str(path))
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise TargetError(f"not a JSON report: {exc}", where=str(path)) from None
    import jsonschema

    from imagelint.report.schema import report_schema

    validator = jsonschema.Draft202012Validator(report_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise TargetError(f"not an imagelint report ({at}: {error.message[:200]})", where=str(path))
    return document, hashlib.sha256(data).hexdigest()
