"""The remote collector: a POSIX-shell script (``collect.sh``, shipped as package data) that gathers
a bundle on an instance, and the plan that tells it what to gather (:mod:`imagelint.collector.plan`)."""

from __future__ import annotations

MAX_BUNDLE = 1536 * 1024 * 1024  # bytes of bundle brought home at most, whatever the transport


def script_text() -> str:
    """The collector script, as shipped inside the package."""
    from importlib import resources  # here: an audit imports this package for its ssh specs only

    return resources.files("imagelint.collector").joinpath("collect.sh").read_text(encoding="utf-8")
