"""Soak: measure memory-cgroup growth (live and dying) and service restarts on a live host over minutes.

- :mod:`imagelint.soak.runner`: the sampling loop (:func:`run_soak`), stoppable by signals;
- :mod:`imagelint.soak.command`: ``imagelint soak``, which runs the loop and judges the soak rules.

What it measures are facts, in the fact layer where the check kinds read them:
:mod:`imagelint.facts.cgroups` (the samples), :mod:`imagelint.facts.soak` (:class:`SoakResult`,
:class:`SoakFacts`), :mod:`imagelint.facts.trend` (Theil–Sen slope, Mann–Kendall significance) and
:mod:`imagelint.facts.systemd.show` (``NRestarts`` snapshots and deltas, for attribution); the
per-CPU reads beside the samples (the hot-core signal) come from :mod:`imagelint.probes.cpu`.
"""
