"""Facts: parsers that turn what a target holds or a host answered into data. Pure functions; no rule logic.

Live reads of the running host are in :mod:`imagelint.probes`, which hands its bytes to these parsers.
"""
