"""Probes: live reads of the running host (``/proc``, ``/sys``, ``systemctl``, the journal directory).

Each probe reads the same data that :mod:`imagelint.bundle.probes` and :mod:`imagelint.bundle.symptoms`
read back from a collected bundle (cgroup samples and the memory.stat walk, ``systemctl show``,
``/proc/stat``, ``/proc/interrupts`` and the NICs' devices), and both hand the bytes to the same
parser in :mod:`imagelint.facts`. facts/ parses and never imports from here; probes/ reads the host
and hands over.
"""
