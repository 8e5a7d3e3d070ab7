"""The commands that open an image and hand it to the session: one module per door.

Each command turns its arguments into targets through :mod:`imagelint.openers`, drives the engine
through :mod:`imagelint.session` and writes its document through :mod:`imagelint.formats`; none of
them assembles a run of its own. ``soak`` and ``watch`` are packages of their own beside these.
"""
