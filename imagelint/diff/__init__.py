"""``imagelint diff OLD NEW``: what an image version changed that matters at boot.

Each side is an image (opened as ``audit`` opens it, and audited with the same rules and config)
or a JSON report (its inventory and findings). :mod:`.compare` lists the changes between the two
inventories and finding sets; the config's ``diff:`` section (:mod:`.policy`) says which kinds fail
or warn; :mod:`imagelint.report.diff_verdict` decides the exit code once; :mod:`.render` prints
text, JSON (schema: ``imagelint schema diff``) and Markdown.
"""
