"""Compact chart history: the few rates a chart draws, as arrays of floats.

A whole timeline Point holds a Snapshot and its Rates: every IRQ's count on every CPU.
Keeping thousands of them costs CPUs × IRQs × points (gigabytes on a 256-CPU server
after an hour), while the charts draw only each interface's rx/tx bits per second and
each latency target's RTT. This keeps exactly those, 8 bytes a value, for the newest
`max_points` samples, so its size is series drawn × points drawable, whatever the host.

A series is stored only for the samples it has a figure in (in runs; a short gap inside
one is NaN: no rates for that interval), so an interface that lives a few seconds costs
those seconds, and a name that comes back after minutes (a VM's vnet3, a lab's veth0 made
again) costs its figures, not the minutes between: on a host whose containers make and
destroy interfaces all day, the history is the size of what was seen in the window, not
of every name seen in it times the window. A latency target that was probed but has no
RTT is +inf, so "probed, nothing back" still opens the target's series as it did from
whole points. A series whose values all fall before the kept span (an interface or target
that vanished) is dropped when the arrays are trimmed.
"""

from __future__ import annotations

import bisect
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


# a gap up to this many samples is filled with NaN; a longer one starts a new run. A run
# costs a tuple and `width` arrays (~100 + 80 x width bytes), a NaN 8 bytes a column:
# past 16 samples a new run is the cheaper, and a name that comes back after minutes
# (vnet3, tap0, a lab's veth0 made again) costs its figures, not the minutes between
SHORT_GAP = 16


class _Series:
    """One series' values, in runs of consecutive samples: run k's `cols[c][j]` is the
    value at absolute sample index `firsts[k] + j`. Nothing is stored before an interface
    appears, after it vanishes or while it is away; a short gap inside a run (a sample
    without a figure) is NaN."""

    __slots__ = ("firsts", "runs")

    def __init__(self, first: int, width: int) -> None:
        self.firsts: list[int] = [first]
        self.runs: list[tuple[array[float], ...]] = [tuple(array("d") for _ in range(width))]

    def end(self) -> int:
        return self.firsts[-1] + len(self.runs[-1][0])

    def put(self, at: int, values: tuple[float, ...]) -> None:
        """The values of absolute sample `at`; a second put for the same sample wins it."""
        gap = at - self.end()
        cols = self.runs[-1]
        if gap < 0:
            if at >= self.firsts[-1]:  # not before the last run: a sample only goes back one
                for col, v in zip(cols, values):
                    col[-1] = v
            return
        if gap > SHORT_GAP:
            self.firsts.append(at)
            self.runs.append(cols := tuple(array("d") for _ in cols))
            gap = 0
        for col, v in zip(cols, values):
            if gap:
                col.extend(array("d", [_NAN]) * gap)
            col.append(v)

    def get(self, at: int, col: int = 0) -> float:
        firsts = self.firsts
        k = len(firsts) - 1
        if at < firsts[k]:  # not the newest run (which charts mostly read): find its run
            k = bisect.bisect_right(firsts, at) - 1
            if k < 0:
                return _NAN
        c = self.runs[k][col]
        j = at - firsts[k]
        return c[j] if j < len(c) else _NAN

    def forget_before(self, at: int) -> bool:
        """Drop the values before absolute sample `at`; False when none are left."""
        if at >= self.end():
            return False
        firsts, runs = self.firsts, self.runs
        k = bisect.bisect_right(firsts, at) - 1
        if k > 0:
            del firsts[:k], runs[:k]
        cut = at - firsts[0]
        if cut > 0:
            for c in runs[0]:
                del c[:cut]
            firsts[0] = at
            if not runs[0][0]:  # the whole first run was before `at`: the next starts it
                del firsts[0], runs[0]
        return True

    def nbytes(self) -> int:
        return sum(c.buffer_info()[1] * c.itemsize for cols in self.runs for c in cols)


class ChartHistory:
    """Appended by the timeline's producer (under its lock), read by the drawing code.

    A series costs only the samples in which it had a figure (and its short gaps): interfaces
    that come and go by the thousand (containers, a churning host) each cost their own
    lifetime, not the whole window, and a sample costs the series it holds, not every
    series seen in the window."""

    def __init__(self, max_points: int) -> None:
        self.max_points = max(1, max_points)
        # arrays are trimmed in chunks, so a trim's memmove is paid once per `_slack` points
        self._slack = max(16, self.max_points // 4)
        self._t_mono = array("d")
        self._base = 0  # absolute index of _t_mono[0]
        self._stepped_back = -1  # absolute index of the last sample whose time fell
        self._links: dict[str, _Series] = {}  # bytes/s rx, tx
        self._latency: dict[str, _Series] = {}  # ms

    def __len__(self) -> int:
        return min(len(self._t_mono), self.max_points)

    def oldest_t_mono(self) -> float | None:
        """The monotonic time of the oldest kept sample; None before the first."""
        t = self._t_mono
        return t[max(0, len(t) - self.max_points)] if t else None

    def append(self, snap: Snapshot, rates: Rates | None) -> None:
        at = self._base + len(self._t_mono)
        if self._t_mono and not snap.t_mono >= self._t_mono[-1]:
            self._stepped_back = at  # a replay across a reboot: times fell (or are NaN)
        self._t_mono.append(snap.t_mono)
        if rates is not None:
            for name, lr in rates.links.items():
                rx, tx = lr.rx_bytes_per_s, lr.tx_bytes_per_s
                if rx is None or tx is None:
                    continue
                pair = self._links.get(name)
                if pair is None:
                    pair = self._links[name] = _Series(at, 2)
                pair.put(at, (rx, tx))
        lat = getattr(snap, "latency", None) or {}
        for target, stats in lat.items():
            key = str(target)  # two targets that print alike: the later value wins the slot
            ms = latency_ms(stats)
            ys = self._latency.get(key)
            if ys is None:
                ys = self._latency[key] = _Series(at, 1)
            ys.put(at, (_PROBED if ms is None else float(ms),))
        if len(self._t_mono) >= self.max_points + self._slack:
            self._trim()

    def _trim(self) -> None:
        cut = len(self._t_mono) - self.max_points
        del self._t_mono[:cut]
        self._base += cut
        for series in (self._links, self._latency):
            for key in [k for k, s in series.items() if not s.forget_before(self._base)]:
                del series[key]  # vanished before the kept span began

    def _span(self, window_s: float) -> tuple[float, list[int]]:
        """The newest time and the indexes of the kept samples within `window_s` of it."""
        t = self._t_mono
        if not t:
            return 0.0, []
        now = t[-1]
        start = max(0, len(t) - self.max_points)
        lo = start
        if self._stepped_back < self._base + start:
            # the kept times only grow (one monotonic clock), so the window's first sample
            # is found by bisection: a 60 s chart over an hour's history reads 60 samples,
            # not 3,600, a frame
            lo = bisect.bisect_left(t, now - window_s, start, len(t))
            while lo > start and now - t[lo - 1] <= window_s:  # the filter's own rounding decides
                lo -= 1
        return now, [i for i in range(lo, len(t)) if now - t[i] <= window_s]

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
        t, base = self._t_mono, self._base
        for i in idx:
            r = pair.get(base + i)
            if r != r:  # NaN: no figure in that interval
                continue
            xs.append(round(t[i] - now, 3))
            rx.append(8 * r)
            tx.append(8 * pair.get(base + i, 1))
        return xs, rx, tx

    def latency_series(self, window_s: float) -> dict[str, tuple[list[float], list[float]]]:
        """RTT per target over the window, targets in the order they first appear in it."""
        now, idx = self._span(window_s)
        t, base = self._t_mono, self._base
        first: list[tuple[int, int, str]] = []
        for order, (key, ys) in enumerate(self._latency.items()):
            for i in idx:
                if ys.get(base + i) == ys.get(base + i):
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
                v = ys.get(base + i)
                if v != v or v == _PROBED:
                    continue
                xs.append(round(t[i] - now, 3))
                vals.append(v)
            out[key] = (xs, vals)
        return out

    def nbytes(self) -> int:
        """What the arrays hold (for the bounds test and the benchmark's notes)."""
        n = self._t_mono.buffer_info()[1] * self._t_mono.itemsize
        n += sum(s.nbytes() for s in self._links.values())
        n += sum(s.nbytes() for s in self._latency.values())
        return n


__all__ = ["ChartHistory", "latency_ms"]
