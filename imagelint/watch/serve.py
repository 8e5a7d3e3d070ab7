"""The ``--listen ADDR:PORT`` endpoint: ``prometheus_client``'s HTTP server on its own thread.

Any bad address, or one that cannot be bound (in use, not local, no permission), is a usage error at
start (one line, exit 2): a watch that silently serves nothing would look like a healthy quiet host.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from imagelint.errors import UsageError

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (all addresses) → (host, port)."""
    where = f"--listen {text}"
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError("expected ADDR:PORT with a port from 1 to 65535", where=where)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise UsageError("write an IPv6 address in brackets: [::1]:PORT", where=where)
    return host or "0.0.0.0", int(port_text)


def serve(text: str, registry: CollectorRegistry) -> Any:
    """Start serving ``/metrics``; returns the server (``shutdown()`` stops it)."""
    from prometheus_client import start_http_server

    host, port = parse_listen(text)
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise UsageError(f"cannot listen: {reason}", where=f"--listen {text}") from None
    return server
