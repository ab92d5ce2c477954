"""Latency statistics of one target over one sampling interval.

The prober collects raw RTT samples; this module turns them into the figures the UI
and the JSON show (loss, min/avg/max/mdev like iputils ping, and percentiles), so the
maths is a pure function that tests can check against hand-computed values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Probes to one target whose fate was decided since the previous `take()`.

    `sent` counts probes answered or timed out in the interval (a probe still in flight
    is counted in the next one), so `received <= sent` always holds. RTT fields are
    None when there is no sample; `loss_pct` is None when nothing was sent.
    """

    target: str  # exactly as the user gave it: "10.0.0.1", "tcp://example.org:443"
    address: str | None  # the resolved address probed, None until resolved
    sent: int
    received: int
    loss_pct: float | None
    rtt_min_ms: float | None
    rtt_avg_ms: float | None
    rtt_max_ms: float | None
    rtt_mdev_ms: float | None
    rtt_p50_ms: float | None
    rtt_p90_ms: float | None
    rtt_p99_ms: float | None
    error: str | None = None  # one line a person can act on


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) by linear interpolation between closest ranks.

    The same definition as numpy's default and `statistics.quantiles(method="inclusive")`:
    rank h = (n - 1) * p / 100, interpolated between the values at floor(h) and ceil(h).
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    h = (n - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (h - lo)


def summarize(rtts_ms: Sequence[float], sent: int, target: str = "",
              address: str | None = None, error: str | None = None) -> LatencyStats:
    """Statistics of `rtts_ms` (one per received reply) out of `sent` probes.

    mdev is the population standard deviation, as iputils ping prints it:
    sqrt(mean(x^2) - mean(x)^2).
    """
    received = len(rtts_ms)
    if received > sent:
        raise ValueError(f"{received} replies for {sent} probes")
    loss = None if sent == 0 else 100.0 * (sent - received) / sent
    if received == 0:
        return LatencyStats(target, address, sent, 0, loss,
                            None, None, None, None, None, None, None, error)
    ordered = sorted(rtts_ms)
    mean = math.fsum(ordered) / received
    var = max(0.0, math.fsum(x * x for x in ordered) / received - mean * mean)
    return LatencyStats(
        target, address, sent, received, loss,
        ordered[0], mean, ordered[-1], math.sqrt(var),
        percentile(ordered, 50), percentile(ordered, 90), percentile(ordered, 99),
        error,
    )


JSON_KEYS = ("sent", "received", "loss_pct", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms",
             "rtt_mdev_ms", "rtt_p50_ms", "rtt_p90_ms", "rtt_p99_ms", "address", "error")


def to_json(stats: LatencyStats) -> dict[str, Any]:
    """The JSON object of one target: exactly the keys in `JSON_KEYS`, RTTs rounded to ns."""
    out: dict[str, Any] = {}
    for key in JSON_KEYS:
        value = getattr(stats, key)
        if isinstance(value, float):
            value = round(value, 6)
        out[key] = value
    return out
