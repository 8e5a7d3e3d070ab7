"""``imagelint diff OLD NEW``: what an image version changed that matters at boot.

Each side is an image (opened as ``audit`` opens it, and audited with the same rules and config)
or a JSON report (its inventory and findings). :mod:`.compare` lists the changes between the two
inventories and finding sets; the config's ``diff:`` section (:mod:`.policy`) says which kinds fail
or warn; :mod:`.verdict` decides the exit code once. The command itself (both sides opened and
audited, the changes judged) is :mod:`imagelint.commands.diff`; :mod:`imagelint.formats.diff_lines`
prints text and Markdown, the result's ``to_dict`` the JSON (schema: ``imagelint schema diff``).
"""
