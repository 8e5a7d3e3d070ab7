"""Reading a JSON report back: the file given as ``audit --baseline`` or as a side of ``imagelint diff``.

A report file is input like any other, possibly hostile: only a regular file is opened (a FIFO or
a device is refused from its ``stat``, before any open that could block or act, and the open
itself is non-blocking and checked again with ``fstat``); it is refused over ``MAX_REPORT_BYTES``
before it is read; it is parsed with JSON's non-finite constants (``NaN``, ``Infinity``) and
overflowing numbers refused, at most ``MAX_VALUES`` values and ``MAX_DEPTH`` levels (the schema
check and everything after it recurse); and it is checked against the published schema
(``imagelint schema report``) before any field is used. A file that is missing, too large, not
JSON or not a report is one line and exit 3 (the comparison could not be made on data it did not
see), naming the file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from imagelint.errors import TargetError

# A report lists at most a capped number of findings per rule and an inventory of a few thousand
# units and packages: the largest real ones are about 1 MiB (the sample image's: 58 KiB). 8 MiB and
# 200,000 values are well above that, and keep what a report built to be costly parses to (and
# what a baseline's absent findings add to the new report) under the 150 MiB the CLI may use.
MAX_REPORT_BYTES = 8 * 1024 * 1024
MAX_VALUES = 200_000  # values and keys (a real report: tens of thousands)
MAX_DEPTH = 32  # nesting levels (a real report: under ten)
MAX_INT_DIGITS = 30


def read_report_dict(path: Path) -> tuple[dict[str, Any], str]:
    """The report in ``path`` as its JSON dict, validated against the report schema, and the
    SHA-256 of the file."""
    data = _read_capped(path)
    document = _parse(data, str(path))
    import jsonschema

    from imagelint.report.schema import report_schema

    validator = jsonschema.Draft202012Validator(report_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        at = "/".join(str(p)[:80] for p in error.absolute_path) or "(top level)"
        raise TargetError(f"not an imagelint report ({at}: {error.message[:200]!r})", where=str(path))
    return document, hashlib.sha256(data).hexdigest()


def _read_capped(path: Path) -> bytes:
    where = str(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise TargetError("report is not a regular file (a FIFO, a device...); refused", where=where)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise TargetError(f"report cannot be read: {exc.strerror}", where=where) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the stat and the open
            raise TargetError("report is not a regular file (a FIFO, a device...); refused", where=where)
        if st.st_size > MAX_REPORT_BYTES:
            raise TargetError(f"report is larger than {MAX_REPORT_BYTES // 2**20} MiB", where=where)
        chunks: list[bytes] = []
        left = MAX_REPORT_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise TargetError(f"report cannot be read: {exc.strerror}", where=where) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_REPORT_BYTES:  # grew after the fstat
        raise TargetError(f"report is larger than {MAX_REPORT_BYTES // 2**20} MiB", where=where)
    return data


def _parse(data: bytes, where: str) -> Any:
    # every value but the first follows a '[', a '{' (keys), a ',' or a ':' (values): an upper
    # bound on how many Python objects the parse can make, counted before it makes them
    tokens = sum(data.count(c) for c in (b"[", b"{", b",", b":"))
    if tokens > 2 * MAX_VALUES:
        raise TargetError(f"not a JSON report: more than {MAX_VALUES:,} values", where=where)
    try:
        document = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite, parse_int=_bounded)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise TargetError(f"not a JSON report: {str(exc)[:200]}", where=where) from None
    _check_depth(document, where)
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} overflows a float")
    return value


def _bounded(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text):,} digits")
    return int(text)


def _check_depth(document: Any, where: str) -> None:
    """No deeper than ``MAX_DEPTH`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TargetError(f"not a JSON report: nested more than {MAX_DEPTH} levels", where=where)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
