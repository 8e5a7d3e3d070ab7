"""``ssh://[USER@]HOST[:PORT]``: what a host spec may hold, checked before anything runs.

The spec is the user's, but it ends up on the ssh client's command line and in `ssh_config`'s
``%h``/``%r`` expansions (a ``ProxyCommand`` runs them through a shell), so only the characters of a
host name, an IPv4 or bracketed IPv6 address, an ``ssh_config`` alias and a POSIX user name are
accepted; none may start with ``-``. The destination is always passed after ``--``.
"""

from __future__ import annotations

from typing import NamedTuple

from imagelint import lazy
from imagelint.errors import UsageError

SCHEME = "ssh://"
_USER = lazy.regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,31}")
_NAME = lazy.regex(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})")
_IPV6 = lazy.regex(r"\[([0-9A-Fa-f:.]{2,45})\]")
_PORT = lazy.regex(r"[0-9]{1,5}")


class HostSpec(NamedTuple):
    """A validated ``ssh://`` spec."""

    host: str  # a name, an ssh_config alias, or an address (IPv6 without its brackets)
    user: str | None = None
    port: int | None = None

    @property
    def destination(self) -> str:
        """The ssh destination argument: ``[USER@]HOST``."""
        return f"{self.user}@{self.host}" if self.user else self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{SCHEME}{self.user + '@' if self.user else ''}{host}{port}"


def is_ssh(spec: str) -> bool:
    return spec.startswith(SCHEME)


def parse(spec: str) -> HostSpec:
    """The spec as a :class:`HostSpec`; a UsageError (exit 2) naming what is wrong otherwise."""
    if not is_ssh(spec):
        raise UsageError(f"{spec!r}: a host is ssh://[USER@]HOST[:PORT]")
    rest = spec[len(SCHEME) :]
    user, at, hostport = rest.rpartition("@")
    if at and not _USER().fullmatch(user):
        raise UsageError(f"{spec!r}: the user name may hold letters, digits, '.', '_' and '-' only")
    six = _IPV6().match(hostport)
    if six:
        host, tail = six.group(1), hostport[six.end() :]
    else:
        host, colon, port_text = hostport.partition(":")
        tail = colon + port_text
        if not _NAME().fullmatch(host):
            raise UsageError(
                f"{spec!r}: the host may hold letters, digits, '.', '_' and '-' only "
                "(an IPv6 address in brackets), and no path"
            )
    port = None
    if tail:
        if not tail.startswith(":") or not _PORT().fullmatch(tail[1:]) or not 0 < int(tail[1:]) < 65536:
            raise UsageError(f"{spec!r}: the port is a number from 1 to 65535")
        port = int(tail[1:])
    return HostSpec(host, user or None, port)
