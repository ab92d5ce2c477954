"""Percentiles from the probes' log2 histograms.

The kernel side counts each duration in slot `floor(log2(ns)) + 1` (bcc's bpf_log2l),
so slot s >= 1 holds durations in [2^(s-1), 2^s) ns and the last slot also holds
everything longer. A percentile is estimated by walking the cumulative counts to the
slot that holds it and interpolating linearly inside that slot; the answer is exact to
within a factor of two, which is what a log2 histogram can promise.
"""

from __future__ import annotations

from typing import Sequence


def slot_bounds(slot: int) -> tuple[float, float]:
    """[low, high) in ns of durations counted in `slot`."""
    if slot <= 0:
        return 0.0, 1.0
    return float(1 << (slot - 1)), float(1 << slot)


def percentile(hist: Sequence[int], q: float) -> float | None:
    """Estimated `q`-quantile (0 < q <= 1) in ns of a log2 histogram; None when empty."""
    total = sum(hist)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for slot, n in enumerate(hist):
        if n <= 0:
            continue
        if seen + n >= rank:
            lo, hi = slot_bounds(slot)
            return lo + (hi - lo) * max(0.0, rank - seen) / n
        seen += n
    lo, hi = slot_bounds(len(hist) - 1)
    return hi


def percentiles(hist: Sequence[int], qs: Sequence[float] = (0.5, 0.9, 0.99)) -> tuple[
        float | None, ...]:
    """Several quantiles of one histogram (p50/p90/p99 by default)."""
    return tuple(percentile(hist, q) for q in qs)


def diff(cur: Sequence[int], prev: Sequence[int] | None) -> tuple[int, ...]:
    """Counts added to a cumulative histogram since `prev` (all of `cur` when None)."""
    if prev is None:
        return tuple(cur)
    return tuple(c - p for c, p in zip(cur, prev))
