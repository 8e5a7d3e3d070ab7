"""Bundles: what the remote collector (``imagelint/collector/collect.sh``) sends back, read at home.

A bundle is a tar (gzip-compressed when the instance has gzip) of ``./<image path>`` entries
(directories, symlinks, regular files with their content) and ``imagelint/`` (``manifest.txt``,
``live/`` with ``systemctl show`` output, ``soak/`` with cgroup samples). It comes from an
untrusted machine: :mod:`imagelint.bundle.extract` unpacks it under explicit checks,
:mod:`imagelint.bundle.target` reads the tree as an image, :mod:`imagelint.bundle.probes` turns the
recorded probes into the live and soak facts, and :mod:`imagelint.bundle.run` runs the engine.
"""
