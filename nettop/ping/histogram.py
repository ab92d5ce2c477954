"""Lifetime RTT histogram and probe counts of one target, for `nettop serve`.

`LatencyStats` (stats.py) summarize the probes of one sampling interval and are reset by
each `take()`; a Prometheus histogram needs the opposite: cumulative bucket counts that
only grow, so that `histogram_quantile(rate(...))` works over any window. The tracker
feeds both from the same replies. Memory is fixed: one counter per bucket.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

# seconds: 50 µs (loopback, a quiet LAN) to 2.5 s (a bloated queue), roughly 1-2.5-5 steps
BUCKETS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
             0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True)
class HistogramView:
    """A consistent copy: `buckets[i]` counts RTTs <= BUCKETS_S[i] (cumulative)."""

    buckets: tuple[int, ...]
    count: int  # replies, also the +Inf bucket
    sum_s: float
    sent: int  # probes whose fate is decided (answered, lost or late)


class RttHistogram:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = [0] * (len(BUCKETS_S) + 1)
        self._sum = 0.0
        self._sent = 0

    def observe(self, rtt_s: float) -> None:
        i = bisect.bisect_left(BUCKETS_S, rtt_s)
        with self._lock:
            self._counts[i] += 1
            self._sum += rtt_s
            self._sent += 1

    def lost(self, n: int = 1) -> None:
        with self._lock:
            self._sent += n

    def view(self) -> HistogramView:
        with self._lock:
            counts, total, sent = list(self._counts), self._sum, self._sent
        cumulative, run = [], 0
        for c in counts[:-1]:
            run += c
            cumulative.append(run)
        return HistogramView(tuple(cumulative), run + counts[-1], total, sent)
