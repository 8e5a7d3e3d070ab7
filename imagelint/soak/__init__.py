"""Soak: measure memory-cgroup growth (live and dying) and service restarts on a live host over minutes.

- :mod:`imagelint.soak.runner`: the sampling loop (:func:`run_soak`) and its :class:`SoakResult`;
- :mod:`imagelint.soak.stats`: Theil–Sen slope, Mann–Kendall significance, ratio, projections;
- :mod:`imagelint.soak.restarts`: systemd ``NRestarts`` snapshots and deltas, for attribution.

The samples themselves come from :mod:`imagelint.facts.cgroups`; the per-CPU reads beside them (the
hot-core signal) from :mod:`imagelint.facts.cpusampler`.
"""
