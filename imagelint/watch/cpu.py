"""Per-CPU saturation for the watch: the hook for the /proc/stat sampler of issue 18.

HOOK: ``CpuWatch.poll`` is where the per-CPU sampler (``imagelint.facts.cpustat``, branch
``hotcore``) plugs in. Until it is merged, the ``cpu`` source reports itself unavailable
(``imagelint_source_up{source="cpu"} 0``) and no CPU series are exported.
"""

from __future__ import annotations

from imagelint.watch.state import CpuSaturation


class CpuUnavailable(Exception):
    """The per-CPU source cannot be read (or is not built into this version)."""


class CpuWatch:
    def __init__(self, proc_root: str = "/proc", window_seconds: float = 3600.0) -> None:
        self.proc_root = proc_root
        self.window_seconds = window_seconds

    def poll(self, now: float) -> CpuSaturation:
        raise CpuUnavailable("the per-CPU /proc/stat sampler (issue 18) is not in this build")
