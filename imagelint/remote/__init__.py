"""Running hosts reached without imagelint on them: the transport that carries the collector
(:mod:`imagelint.collector`) to a host and its bundle back, read at home as any bundle is
(:mod:`imagelint.bundle`). One module per transport; today OpenSSH (:mod:`imagelint.remote.ssh`)."""
