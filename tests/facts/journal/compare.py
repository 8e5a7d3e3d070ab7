"""Turn imagelint entries into what ``journalctl -o json`` prints, following journalctl's rules.

journalctl (systemd 252, ``output_json``) prints a value as a JSON string when it is valid UTF-8 with
no control characters other than TAB and LF (``utf8_is_printable``), otherwise as an array of byte
values; without ``--all`` a field whose ``NAME=value`` is 4096 bytes or more becomes ``null``; a
repeated field becomes an array; metadata are strings. It does not print ``__SEQNUM`` (added in 254).
"""

from __future__ import annotations

JSON_THRESHOLD = 4096


def printable(raw: bytes) -> bool:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any((ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in text)


def _value(name: str, value: object, all_fields: bool) -> object:
    assert isinstance(value, (str, bytes)), (name, value)
    raw = value.encode() if isinstance(value, str) else value
    if isinstance(value, bytes):
        # the reader promises bytes only for invalid UTF-8
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            raise AssertionError(f"{name}: valid UTF-8 returned as bytes")
    if not all_fields and len(name) + 1 + len(raw) >= JSON_THRESHOLD:
        return None
    return raw.decode() if printable(raw) else list(raw)


def as_journalctl_json(entry: dict[str, object], *, all_fields: bool = True) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, value in entry.items():
        if name in ("__SEQNUM", "__SEQNUM_ID"):
            continue
        if name in ("__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP"):
            assert isinstance(value, int)
            out[name] = str(value)
        elif name in ("__CURSOR", "_BOOT_ID"):
            out[name] = value
        elif isinstance(value, list):
            assert len(value) >= 2, f"{name}: a list must mean a repeated field"
            out[name] = [_value(name, v, all_fields) for v in value]
        else:
            out[name] = _value(name, value, all_fields)
    return out
