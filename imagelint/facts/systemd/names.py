"""Unit names as systemd understands them: validity, type, templates, instances and escaping.

These follow systemd's ``unit-name.c``: a name is ``PREFIX[@INSTANCE].TYPE`` made of ASCII letters,
digits and ``:-_.\\`` (plus ``@`` after the first ``@``), shorter than 256 characters, with a known
type suffix. A *template* has an empty instance (``getty@.service``), an *instance* a non-empty one.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

UNIT_NAME_MAX = 256

UNIT_TYPES = frozenset(
    {"service", "mount", "swap", "socket", "target", "device", "automount", "timer", "path", "slice", "scope"}
)
# unit_type_may_alias() / unit_type_may_template() in systemd's unit-file.c
ALIAS_TYPES = frozenset({"service", "socket", "target", "device", "timer", "path"})
TEMPLATE_TYPES = frozenset({"service", "socket", "target", "timer", "path"})

# ASCII letters and digits spelled out: `imagelint units` would import the string module for this alone
_VALID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@")


class NameKind(StrEnum):
    PLAIN = "plain"
    TEMPLATE = "template"
    INSTANCE = "instance"


@lru_cache(maxsize=8192)  # asked ~90 times per unit while the index is built; bounded: names are image data
def name_kind(name: str) -> NameKind | None:
    """The kind of a unit name, or None when it is not a valid unit name."""
    if not name or len(name) >= UNIT_NAME_MAX:
        return None
    dot = name.rfind(".")
    if dot <= 0 or name[dot + 1 :] not in UNIT_TYPES:
        return None
    stem = name[:dot]
    if not _VALID_CHARS.issuperset(stem):
        return None
    at = stem.find("@")
    if at == 0:
        return None
    if at < 0:
        return NameKind.PLAIN
    return NameKind.TEMPLATE if at == len(stem) - 1 else NameKind.INSTANCE


def is_valid(name: str) -> bool:
    return name_kind(name) is not None


def unit_type(name: str) -> str:
    """The type suffix (``service``); the caller has checked the name is valid."""
    return name[name.rfind(".") + 1 :]


def template_of(name: str) -> str | None:
    """``foo@.service`` for ``foo@bar.service`` or ``foo@.service``; None for plain or invalid names."""
    kind = name_kind(name)
    if kind is None or kind is NameKind.PLAIN:
        return None
    at = name.find("@")
    return name[: at + 1] + name[name.rfind(".") :]


def instance_of(name: str) -> str | None:
    """The instance part of ``foo@bar.service`` (``bar``); ``""`` for a template; None for plain names."""
    kind = name_kind(name)
    if kind is None or kind is NameKind.PLAIN:
        return None
    return name[name.find("@") + 1 : name.rfind(".")]


def prefix_of(name: str) -> str:
    """``foo`` for ``foo@bar.service`` and for ``foo.service``."""
    stem = name[: name.rfind(".")]
    at = stem.find("@")
    return stem if at < 0 else stem[:at]


def replace_instance(template: str, instance: str) -> str:
    at = template.find("@")
    return template[: at + 1] + instance + template[template.rfind(".") :]


def instance_is_valid(instance: str) -> bool:
    return bool(instance) and _VALID_CHARS.issuperset(instance)


def unescape(text: str) -> str:
    """systemd's unit_name_unescape(): ``-`` is ``/`` and ``\\xNN`` is the byte NN."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "-":
            out.append("/")
        elif c == "\\" and text[i + 1 : i + 2] == "x" and len(text) >= i + 4:
            try:
                out.append(chr(int(text[i + 2 : i + 4], 16)))
                i += 4
                continue
            except ValueError:
                out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def dropin_stems(name: str) -> tuple[tuple[str, bool], ...]:
    """The names whose ``NAME.d`` (``.wants``...) directories apply to ``name``, in lookup order.

    unit_file_find_dirs(): the name itself, for an instance its template, then the dash prefixes
    (of the template, for an instance). Each comes with whether it is the unit's own name (or
    template), whose directory may be a link to a directory; a prefix directory must be a directory.
    Not memoized: a hostile 255-character name has ~125 prefixes, too many to keep thousands of.
    """
    own = name
    stems: list[tuple[str, bool]] = [(name, True)]
    if name_kind(name) is NameKind.INSTANCE:
        own = template_of(name) or name
        stems.append((own, True))
    stems.extend((prefix, False) for prefix in dash_prefixes(own))
    return tuple(stems)


def dash_prefixes(name: str) -> list[str]:
    """Prefix drop-in names, most specific first, as the service manager looks them up.

    ``foo-bar-baz.service`` gives ``foo-bar-.service``, ``foo-.service``; a template or instance
    ``a-b-c@.service`` gives ``a-b-.service``, ``a-b-@.service``, ``a-.service``, ``a-@.service``
    (the instance part plays no role).
    """
    kind = name_kind(name)
    if kind is None:
        return []
    suffix = name[name.rfind(".") :]
    prefix = prefix_of(name)
    out: list[str] = []
    pos = len(prefix)
    while True:
        pos = prefix.rfind("-", 0, pos)
        if pos <= 0:
            return out
        if kind is NameKind.PLAIN and pos == len(prefix) - 1:
            continue  # the name itself ends with a dash: it already is a prefix name
        out.append(prefix[: pos + 1] + suffix)
        if kind is not NameKind.PLAIN:
            out.append(prefix[: pos + 1] + "@" + suffix)
