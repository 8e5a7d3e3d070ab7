"""A bounded window of memory-cgroup samples and the dying-count trend over it.

The window keeps the samples of the last ``max_age`` seconds, at most ``max_samples`` of them (the
oldest go first). The trend is the soak's: Theil–Sen slope with the Mann–Kendall test
(:func:`imagelint.facts.trend.analyse`), whose cost grows with the square of the samples, hence the cap:
360 samples (an hour at 10 s) take a few milliseconds per pass.
"""

from __future__ import annotations

from collections import deque

from imagelint.facts.cgroups import Sample
from imagelint.facts.trend import DEFAULT_ALPHA, Trend, analyse

DEFAULT_MAX_SAMPLES = 360


class SampleWindow:
    def __init__(self, max_age: float, max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        if max_age <= 0 or max_samples < 3:
            raise ValueError("a window needs a positive age and room for 3 samples")
        self.max_age = max_age
        self._samples: deque[Sample] = deque(maxlen=max_samples)

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)
        while self._samples and sample.monotonic - self._samples[0].monotonic > self.max_age:
            self._samples.popleft()

    @property
    def samples(self) -> list[Sample]:
        return list(self._samples)

    @property
    def span_seconds(self) -> float:
        return self._samples[-1].monotonic - self._samples[0].monotonic if len(self._samples) > 1 else 0.0

    def trend(self, alpha: float = DEFAULT_ALPHA) -> Trend | None:
        """The dying count's trend over the window; None with fewer than 3 counted samples."""
        points = [(s.monotonic, float(s.dying)) for s in self._samples if s.dying is not None]
        if len(points) < 3 or points[-1][0] <= points[0][0]:
            return None
        t0 = points[0][0]
        return analyse([t - t0 for t, _ in points], [v for _, v in points], alpha=alpha)
