"""The collector on a running host reached over OpenSSH, nothing installed there: the ``ssh://`` spec
(:mod:`.spec`), what the host's ``sh -s`` reads (:mod:`.script`) and the transport that sends it and
brings the bundle back (:mod:`.transport`); the bundle is read at home as any (:mod:`imagelint.bundle`)."""
