"""Soak: measure memory-cgroup growth (live and dying) and service restarts on a live host over minutes.

- :mod:`imagelint.soak.runner`: the sampling loop (:func:`run_soak`), stoppable by signals;
- :mod:`imagelint.soak.command`: ``imagelint soak``, which runs the loop and judges the soak rules.

What it measures are facts, in the fact layer where the check kinds read them:
:mod:`imagelint.facts.cgroups` (the samples), :mod:`imagelint.facts.soak` (:class:`SoakResult`,
:class:`SoakFacts`), :mod:`imagelint.facts.trend` (Theil–Sen slope, Mann–Kendall significance) and
:mod:`imagelint.facts.systemd.show` (``NRestarts`` snapshots and deltas, for attribution). The reads
of the host that make them are probes: :mod:`imagelint.probes.cgroups` (the samples and the
memory.stat walk), :mod:`imagelint.probes.systemd` (the restart counters),
:mod:`imagelint.probes.cpu` (the per-CPU reads beside the samples, the hot-core signal) and
:mod:`imagelint.probes.interrupts` (where the NIC's interrupts landed).
"""
