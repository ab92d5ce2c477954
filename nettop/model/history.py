"""Compact chart history: the few rates a chart draws, as arrays of floats.

A whole timeline Point holds a Snapshot and its Rates: every IRQ's count on every CPU.
Keeping thousands of them costs CPUs × IRQs × points (gigabytes on a 256-CPU server
after an hour), while the charts draw only each interface's rx/tx bits per second and
each latency target's RTT. This keeps exactly those, 8 bytes a value, for the newest
`max_points` samples, so its size is series drawn × points drawable, whatever the host.

A missing value is NaN (no rates for that interval, the interface absent or without a
figure); a latency target that was probed but has no RTT is +inf, so "probed, nothing
back" still opens the target's series as it did from whole points. A series whose
values in the kept span are all missing (an interface or target that vanished) is
dropped when the arrays are trimmed.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

from nettop.model.rates import Rates
from nettop.model.snapshot import Snapshot

_NAN = math.nan
_PROBED = math.inf  # a latency target in the sample without an RTT


def latency_ms(stats: Any) -> float | None:
    """The RTT a chart plots for one interval: a LatencyStats' average, or a bare number."""
    if isinstance(stats, (int, float)):
        return float(stats)
    return getattr(stats, "rtt_avg_ms", None)


class ChartHistory:
    """Appended by the timeline's producer (under its lock), read by the drawing code."""

    def __init__(self, max_points: int) -> None:
        self.max_points = max(1, max_points)
        # arrays are trimmed in chunks, so a trim's memmove is paid once per `_slack` points
        self._slack = max(16, self.max_points // 4)
        self._t_mono = array("d")
        self._links: dict[str, tuple[array[float], array[float]]] = {}  # bytes/s rx, tx
        self._latency: dict[str, array[float]] = {}  # ms

    def __len__(self) -> int:
        return min(len(self._t_mono), self.max_points)

    def append(self, snap: Snapshot, rates: Rates | None) -> None:
        n = len(self._t_mono)
        self._t_mono.append(snap.t_mono)
        seen: set[str] = set()
        if rates is not None:
            for name, lr in rates.links.items():
                rx, tx = lr.rx_bytes_per_s, lr.tx_bytes_per_s
                if rx is None or tx is None:
                    continue
                pair = self._links.get(name)
                if pair is None:
                    pair = self._links[name] = (array("d", [_NAN]) * n, array("d", [_NAN]) * n)
                pair[0].append(rx)
                pair[1].append(tx)
                seen.add(name)
        for name, (rxs, txs) in self._links.items():
            if name not in seen:
                rxs.append(_NAN)
                txs.append(_NAN)
        lat = getattr(snap, "latency", None) or {}
        probed: set[str] = set()
        for target, stats in lat.items():
            key = str(target)
            ms = latency_ms(stats)
            ys = self._latency.get(key)
            if ys is None:
                ys = self._latency[key] = array("d", [_NAN]) * n
            if key in probed:  # two targets that print alike: the later value wins the slot
                ys[-1] = _PROBED if ms is None else float(ms)
                continue
            ys.append(_PROBED if ms is None else float(ms))
            probed.add(key)
        for key, ys in self._latency.items():
            if key not in probed:
                ys.append(_NAN)
        if len(self._t_mono) >= self.max_points + self._slack:
            self._trim()

    def _trim(self) -> None:
        cut = len(self._t_mono) - self.max_points
        del self._t_mono[:cut]
        for name in list(self._links):
            rxs, txs = self._links[name]
            del rxs[:cut]
            del txs[:cut]
            if all(math.isnan(v) for v in rxs):
                del self._links[name]
        for key in list(self._latency):
            ys = self._latency[key]
            del ys[:cut]
            if all(math.isnan(v) for v in ys):
                del self._latency[key]

    def _span(self, window_s: float) -> tuple[float, list[int]]:
        """The newest time and the indexes of the kept samples within `window_s` of it."""
        t = self._t_mono
        if not t:
            return 0.0, []
        now = t[-1]
        start = max(0, len(t) - self.max_points)
        return now, [i for i in range(start, len(t)) if now - t[i] <= window_s]

    def link_series(self, name: str, window_s: float) -> tuple[list[float], list[float], list[float]]:
        """xs (seconds before the newest sample), rx and tx bits per second of interface
        `name` over the window; empty when it has no figures there."""
        pair = self._links.get(name)
        now, idx = self._span(window_s)
        xs: list[float] = []
        rx: list[float] = []
        tx: list[float] = []
        if pair is None:
            return xs, rx, tx
        rxs, txs = pair
        t = self._t_mono
        for i in idx:
            r = rxs[i]
            if r != r:  # NaN: no figure in that interval
                continue
            xs.append(round(t[i] - now, 3))
            rx.append(8 * r)
            tx.append(8 * txs[i])
        return xs, rx, tx

    def latency_series(self, window_s: float) -> dict[str, tuple[list[float], list[float]]]:
        """RTT per target over the window, targets in the order they first appear in it."""
        now, idx = self._span(window_s)
        t = self._t_mono
        first: list[tuple[int, int, str]] = []
        for order, (key, ys) in enumerate(self._latency.items()):
            for i in idx:
                if ys[i] == ys[i]:
                    first.append((i, order, key))
                    break
        out: dict[str, tuple[list[float], list[float]]] = {}
        for i0, _, key in sorted(first):
            ys = self._latency[key]
            xs: list[float] = []
            vals: list[float] = []
            for i in idx:
                if i < i0:
                    continue
                v = ys[i]
                if v != v or v == _PROBED:
                    continue
                xs.append(round(t[i] - now, 3))
                vals.append(v)
            out[key] = (xs, vals)
        return out

    def nbytes(self) -> int:
        """What the arrays hold (for the bounds test and the benchmark's notes)."""
        n = self._t_mono.buffer_info()[1] * self._t_mono.itemsize
        n += sum((a.buffer_info()[1] + b.buffer_info()[1]) * a.itemsize for a, b in self._links.values())
        n += sum(a.buffer_info()[1] * a.itemsize for a in self._latency.values())
        return n


__all__ = ["ChartHistory", "latency_ms"]
