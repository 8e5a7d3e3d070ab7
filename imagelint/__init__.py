"""imagelint: stop bad machine images before they ship.

The package reads a target (a mounted image or a live host), collects facts from it, runs rules
(data under ``rules/``) built on a small set of check kinds, and renders one report in several
formats. See ``imagelint.engine`` for where the verdict is decided.
"""

__version__ = "0.1.0"
