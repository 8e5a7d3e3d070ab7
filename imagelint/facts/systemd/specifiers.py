"""Unit-name specifiers (``%n``, ``%N``, ``%p``, ``%i``, ``%I``, ``%j``, ``%J``, ``%f``, ``%%`` ...).

Only the specifiers that depend on the unit name are expanded here, plus the user/group ones,
which are fixed for the system manager. Specifiers that depend on the running host (``%H``, ``%m``,
``%b``, ``%v`` ...) are left for the caller to treat as unknown: :class:`SpecifierError` is raised.
"""

from __future__ import annotations

from imagelint.facts.systemd import names


class SpecifierError(ValueError):
    """A specifier that cannot be resolved offline, or a trailing lone ``%``."""


def _name_specifiers(unit: str) -> dict[str, str]:
    stem = unit[: unit.rfind(".")]
    prefix = names.prefix_of(unit)
    instance = names.instance_of(unit)
    unescaped_prefix = names.unescape(prefix)
    j = prefix.rsplit("-", 1)[-1]
    values = {
        "n": unit,
        "N": stem,
        "p": prefix,
        "P": unescaped_prefix,
        "i": instance or "",
        "I": names.unescape(instance) if instance else "",
        "j": j,
        "J": names.unescape(j),
        "f": "/" + (names.unescape(instance) if instance else unescaped_prefix).lstrip("/"),
        "u": "root",
        "U": "0",
        "g": "root",
        "G": "0",
        "%": "%",
    }
    return values


def expand(text: str, unit: str) -> str:
    """Expand name specifiers of ``unit`` in ``text``; raise SpecifierError on any other specifier."""
    if "%" not in text:
        return text
    table = _name_specifiers(unit)
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            raise SpecifierError(f"trailing '%' in {text!r}")
        spec = text[i + 1]
        if spec not in table:
            raise SpecifierError(f"specifier %{spec} in {text!r} cannot be resolved offline")
        out.append(table[spec])
        i += 2
    return "".join(out)
