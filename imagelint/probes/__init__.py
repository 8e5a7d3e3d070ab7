"""Probes: live reads of the running host (``/proc``, ``/sys``, ``systemctl``, the journal directory).

Each probe reads the same data that :mod:`imagelint.bundle.probes` reads back from a collected bundle
(where the collector records it: cgroup samples, ``systemctl show``, the journal), and both hand the
bytes to the same parser in :mod:`imagelint.facts`. facts/ parses and never imports from here;
probes/ reads the host and may import facts/, targets/ and errors.
"""
