"""Command-line entry point.

``--version`` is answered before anything heavy is imported, so that start-up stays close to a bare
interpreter; every other command loads the typer application in ``imagelint.cli.app``.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from imagelint import __version__

        print(f"imagelint {__version__}")
        return
    from imagelint.cli.app import run

    run()
