"""Text a user wrote (a rule pack, a config file), quoted in a one-line error message."""

from __future__ import annotations

MAX_SHOWN = 80  # characters of user text quoted in an error message


def one_line(text: str, limit: int = 300) -> str:
    """``text`` safe for a one-line error message: control characters escaped, length bounded."""
    cleaned = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text[: limit * 4])
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def shown(value: object) -> str:
    """A short quoted form of a user's value for error messages."""
    text = repr(value)
    return one_line(text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 4] + "...'", MAX_SHOWN + 4)
