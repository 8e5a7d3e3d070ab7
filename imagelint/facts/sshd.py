"""The effective global settings of OpenSSH's sshd, read from the image's sshd_config.

sshd takes the *first* value it obtains for a keyword; ``Include`` pulls in files (globs, relative to
/etc/ssh, in lexical order) at the point where it appears; options inside ``Match`` blocks apply
only to matching connections, so they are not global settings and are left out here.

The image is adversarial input: ``Include`` may name the same files many times at every level, so
besides OpenSSH's depth limit the whole read is capped at ``MAX_INCLUDED_FILES`` file reads (an
include bomb is an error that makes the run inconclusive, not a hang).
"""

from __future__ import annotations

import shlex
from dataclasses import field
from typing import NamedTuple

from imagelint.errors import ImageReadError
from imagelint.records import dataclass
from imagelint.targets.interface import Target

SSHD_CONFIG = "/etc/ssh/sshd_config"
MAX_INCLUDE_DEPTH = 16  # OpenSSH's own READCONF_MAX_DEPTH
MAX_INCLUDED_FILES = 256  # file reads per configuration, counting repeats


class SshdSetting(NamedTuple):
    keyword: str
    value: str
    path: str
    line: int


@dataclass
class SshdConfig:
    settings: dict[str, SshdSetting] = field(default_factory=dict)  # lower-case keyword → first value
    files: list[str] = field(default_factory=list)
    undecodable: list[tuple[str, int]] = field(default_factory=list)  # (path, byte offset) of non-UTF-8 files

    def get(self, keyword: str) -> SshdSetting | None:
        return self.settings.get(keyword.lower())


def read_sshd_config(target: Target, path: str = SSHD_CONFIG) -> SshdConfig | None:
    """The global settings, or None when the image has no sshd_config (sshd not installed)."""
    if target.stat(path) is None:
        return None
    config = SshdConfig()
    _read_file(target, path, config, depth=0, in_match=False)
    return config


def _read_file(target: Target, path: str, config: SshdConfig, *, depth: int, in_match: bool) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise ImageReadError(
            path, f"Include nested deeper than {MAX_INCLUDE_DEPTH} levels (an include loop?)"
        )
    if len(config.files) >= MAX_INCLUDED_FILES:
        raise ImageReadError(
            path, f"Include reads more than {MAX_INCLUDED_FILES} files in all (an include bomb?)"
        )
    config.files.append(path)
    content = target.read_text(path)
    if content.invalid_utf8_at is not None:
        config.undecodable.append((path, content.invalid_utf8_at))
    for number, raw in enumerate(content.text.splitlines(), start=1):
        words = _split(raw, path, number)
        if not words:
            continue
        keyword, args = words[0], words[1:]
        lower = keyword.lower()
        if lower == "match":
            in_match = not (len(args) == 1 and args[0].lower() == "all")
            continue
        if lower == "include":
            for pattern in args:
                full = pattern if pattern.startswith("/") else f"/etc/ssh/{pattern}"
                for included in target.glob(full):
                    _read_file(target, included, config, depth=depth + 1, in_match=in_match)
            continue
        if not in_match and lower not in config.settings:
            config.settings[lower] = SshdSetting(keyword, " ".join(args), path, number)


def _split(raw: str, path: str, number: int) -> list[str]:
    line = raw.strip()
    if not line or line.startswith("#"):
        return []
    keyword, _, rest = line.replace("\t", " ").partition(" ")
    if "=" in keyword:  # "Keyword=value" form
        keyword, _, first = keyword.partition("=")
        rest = f"{first} {rest}"
    rest = rest.strip().lstrip("=").strip()
    try:
        args = shlex.split(rest, comments=True)
    except ValueError:
        raise ImageReadError(f"{path}:{number}", "unbalanced quotes") from None
    return [keyword, *args]
