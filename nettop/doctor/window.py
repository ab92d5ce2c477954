"""The figures rules read: counter differences between the first and last sample of a window.

Averaging each tick's rates would cost one pass per tick over every CPU and IRQ; the
difference of two snapshots gives the same mean over the window in one pass, and only
for what a rule asks (each figure is computed on first use and kept). Counters that went
backwards are judged by `model.counters.delta` (wrap or reset) as the rates are.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Mapping, Sequence

from nettop.model.counters import U32, U64, delta
from nettop.model.counts import CountMatrix, numpy, table_matrix
from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event, Point
from nettop.ping.stats import LatencyStats


def _d(a: int, b: int, modulus: int) -> int:
    return b - a if b >= a else delta(a, b, modulus)[0]


class Window:
    """The last `window_s` seconds of a timeline, as seen by the rules."""

    def __init__(self, points: Sequence[Point], window_s: float = 5.0,
                 events: Iterable[Event] = (), idle_rtt: Mapping[str, float] | None = None) -> None:
        if not points:
            raise ValueError("a window needs at least one sample")
        self.last: Snapshot = points[-1].snapshot
        first = self.last
        i = len(points) - 1
        while i > 0 and self.last.t_mono - points[i - 1].snapshot.t_mono <= window_s + 1e-6:
            i -= 1
            first = points[i].snapshot
        self.first = first
        self.samples = [p.snapshot for p in points[i:]]
        self.history = points  # for baselines (idle RTT) over all the timeline holds
        self.events = list(events)
        self._idle_rtt = idle_rtt  # a running minimum kept by a Watch, else the history's
        self.elapsed = self.last.t_mono - self.first.t_mono
        # each figure the rules ask for, computed at most once per window; one typed slot
        # per kind, so what a method returns is what it stored
        self._cpu_pct: dict[int, tuple[float, float, float]] | None = None
        self._softnet: dict[int, tuple[float, float, float, float]] | None = None
        self._net_rx: dict[int, float] | None = None
        self._irq_counts: dict[int, list[int] | None] = {}
        self._irq_m: tuple[CountMatrix, Any] | None = None  # see _irq_matrix
        self._irq_m_done = False
        self._irq_peaks: tuple[list[int], list[int]] | None = None  # rows' totals and argmax

    @property
    def has_rates(self) -> bool:
        return self.elapsed > 0

    @property
    def since_boot(self) -> bool:
        """The window runs from boot to one capture (model/since_boot.py): its rates are
        since-boot averages, its elapsed time the host's uptime."""
        return self.first.uptime_s == 0.0 and (self.last.uptime_s or 0.0) > 0 and self.elapsed > 0

    @property
    def span(self) -> tuple[float, float]:
        return (self.first.t_wall, self.last.t_wall)

    # --- CPUs ------------------------------------------------------------------------

    def cpu_pct(self) -> Mapping[int, tuple[float, float, float]]:
        """CPU -> (softirq %, hardirq %, idle %) over the window."""
        got = self._cpu_pct
        if got is None:
            out: dict[int, tuple[float, float, float]] = {}
            before = self.first.cpu_times
            for cpu, b in self.last.cpu_times.items():
                a = before.get(cpu)
                if a is None:
                    continue
                total = b.total - a.total
                if total <= 0:
                    continue
                out[cpu] = (100.0 * (b.softirq - a.softirq) / total, 100.0 * (b.irq - a.irq) / total,
                            100.0 * (b.idle + b.iowait - a.idle - a.iowait) / total)
            self._cpu_pct = got = out
        return got

    def softnet(self) -> Mapping[int, tuple[float, float, float, float]]:
        """CPU -> (processed/s, dropped/s, time_squeeze/s, received_rps/s)."""
        got = self._softnet
        if got is None:
            out: dict[int, tuple[float, float, float, float]] = {}
            if self.has_rates:
                e = self.elapsed
                before = self.first.softnet
                for cpu, b in self.last.softnet.items():
                    a = before.get(cpu)
                    if a is not None:
                        out[cpu] = (_d(a.processed, b.processed, U32) / e, _d(a.dropped, b.dropped, U32) / e,
                                    _d(a.time_squeeze, b.time_squeeze, U32) / e,
                                    _d(a.received_rps, b.received_rps, U32) / e)
            self._softnet = got = out
        return got

    def net_rx(self) -> Mapping[int, float]:
        """CPU -> NET_RX softirqs/s."""
        got = self._net_rx
        if got is None:
            out: dict[int, float] = {}
            if self.has_rates:
                before = self.first.softirqs
                for cpu, b in self.last.softirqs.items():
                    a = before.get(cpu)
                    if a is not None:
                        out[cpu] = _d(a.net_rx, b.net_rx, U32) / self.elapsed
            self._net_rx = got = out
        return got

    # --- IRQs, links, queues -----------------------------------------------------------

    def irq_counts(self, irq: int) -> list[int] | None:
        """Interrupts of one IRQ per CPU over the window, aligned with `cpus` (None when its
        counts were not parsed in both samples or the CPU set changed)."""
        if irq in self._irq_counts:
            return self._irq_counts[irq]
        out: list[int] | None = None
        m = self._irq_matrix()
        if m is not None:
            row = m[0].index(irq)
            if row is not None:
                out = m[1][row].tolist()
                self._irq_counts[irq] = out
                return out
        a = self.first.interrupts.irqs.get(irq)
        b = self.last.interrupts.irqs.get(irq)
        if (a is not None and b is not None and a.counts is not None and b.counts is not None
                and self.has_rates and self.first.interrupts.cpus == self.last.interrupts.cpus):
            out = list(map(operator.sub, b.counts, a.counts))
            if out and min(out) < 0:  # a wrapped (or reset) count: judged one by one
                out = [_d(x, y, U32) for x, y in zip(a.counts, b.counts)]
        self._irq_counts[irq] = out
        return out

    def irq_sum(self, irqs: Iterable[int]) -> list[int] | None:
        """The per-CPU interrupts of several IRQs added up (aligned with `cpus`), None when
        none of them has counts. One array sum over the rows when the samples hold their
        count matrices (a NIC of 128 queues on 1,024 CPUs)."""
        m = self._irq_matrix()
        rows: list[int] = []
        acc: list[int] | None = None
        for irq in irqs:
            row = m[0].index(irq) if m is not None else None
            if row is not None:
                rows.append(row)
                continue
            d = self.irq_counts(irq)
            if d is not None:
                acc = d if acc is None else list(map(operator.add, acc, d))
        if rows and m is not None:
            got = m[1][rows].sum(axis=0).tolist()
            acc = got if acc is None else list(map(operator.add, acc, got))
        return acc

    def irq_peak(self, irq: int) -> tuple[int, int] | None:
        """(all interrupts of one IRQ over the window, the index in `cpus` where most
        landed), or None when unknown."""
        m = self._irq_matrix()
        row = m[0].index(irq) if m is not None else None
        if m is not None and row is not None:
            if not m[1].shape[1]:
                return None  # no CPU columns: as an empty list below
            if self._irq_peaks is None:
                self._irq_peaks = (m[1].sum(axis=1).tolist(), m[1].argmax(axis=1).tolist())
            totals, peaks = self._irq_peaks
            return totals[row], peaks[row]
        d = self.irq_counts(irq)
        if not d:
            return None
        return sum(d), d.index(max(d))

    def _irq_matrix(self) -> tuple[CountMatrix, Any] | None:
        """(the last sample's count matrix, whose `index` gives an IRQ's row; the window's
        per-CPU interrupts, int64, in its rows) when both samples' counts are one count
        matrix each, of the same IRQs and CPUs (model/counts.py); else None (per-IRQ lists)."""
        if self._irq_m_done:
            return self._irq_m
        self._irq_m_done = True
        got: tuple[CountMatrix, Any] | None = None
        a, b = self.first.interrupts, self.last.interrupts
        ma, mb = table_matrix(a), table_matrix(b)
        if (ma is not None and mb is not None and ma.same_layout(mb) and a.cpus == b.cpus
                and self.has_rates):
            np = numpy()  # loaded already: the reader made these matrices
            before = ma.values.astype(np.int64)
            d = mb.values.astype(np.int64) - before
            back = d < 0
            if back.any():  # as `_d`: a wrap near the top of 32 bits, else a reset from 0
                wrap = back & (before >= U32 - (U32 >> 2)) & (mb.values < (U32 >> 2))
                d[wrap] += U32
                reset = back & ~wrap
                d[reset] = mb.values[reset]
            got = (mb, d)
        self._irq_m = got
        return got

    @property
    def cpus(self) -> tuple[int, ...]:
        """CPU ids of the interrupt counts' columns."""
        return self.last.interrupts.cpus

    def irq_per_cpu(self, irq: int) -> Mapping[int, float]:
        """CPU -> interrupts/s of one IRQ, only CPUs it fired on ({} when unknown)."""
        d = self.irq_counts(irq)
        if not d:
            return {}
        return {cpu: v / self.elapsed for cpu, v in zip(self.cpus, d) if v}

    def link(self, name: str) -> tuple[float, float, float, float] | None:
        """(rx packets/s, tx packets/s, rx bytes/s, tx bytes/s) of an interface."""
        a, b = self.first.links.get(name), self.last.links.get(name)
        if a is None or b is None or a.ifindex != b.ifindex or not self.has_rates:
            return None
        pairs = [(a.rx_packets, b.rx_packets), (a.tx_packets, b.tx_packets),
                 (a.rx_bytes, b.rx_bytes), (a.tx_bytes, b.tx_bytes)]
        e = self.elapsed
        out = []
        for x, y in pairs:
            if x is None or y is None:
                return None  # counters a captured tree did not hold
            out.append(_d(x, y, U64) / e)
        return (out[0], out[1], out[2], out[3])

    def queue_pps(self, name: str, kind: str = "rx") -> dict[int, float]:
        """Queue index -> packets/s of one interface's rx (or tx) queues."""
        a, b = self.first.queue_stats.get(name), self.last.queue_stats.get(name)
        if a is None or b is None or not self.has_rates:
            return {}
        before = {(q.kind, q.index): q.packets for q in a.queues}
        out: dict[int, float] = {}
        for q in b.queues:
            old = before.get((q.kind, q.index))
            if q.kind == kind and q.packets is not None and old is not None:
                out[q.index] = _d(old, q.packets, U64) / self.elapsed
        return out

    def missed_per_s(self, name: str) -> float | None:
        ta, tb = self.first.tuning, self.last.tuning
        if ta is None or tb is None or not self.has_rates:
            return None
        a, b = ta.nics.get(name), tb.nics.get(name)
        if a is None or b is None or a.rx_missed is None or b.rx_missed is None:
            return None
        return _d(a.rx_missed, b.rx_missed, U64) / self.elapsed

    # --- latency, eBPF ---------------------------------------------------------------

    def latency(self) -> dict[str, list[LatencyStats]]:
        """Target -> the probe results of the window's samples (oldest first)."""
        out: dict[str, list[LatencyStats]] = {}
        for s in self.samples[1:] if len(self.samples) > 1 else self.samples:
            for target, st in s.latency.items():
                out.setdefault(target, []).append(st)
        return out

    def idle_rtt_ms(self, target: str) -> float | None:
        """The lowest RTT the timeline ever saw for `target`: its unloaded path delay."""
        if self._idle_rtt is not None:
            return self._idle_rtt.get(target)
        best: float | None = None
        for p in self.history:
            st = p.snapshot.latency.get(target)
            if st is not None and st.rtt_min_ms is not None and (best is None or st.rtt_min_ms < best):
                best = st.rtt_min_ms
        return best

    def drop_reasons(self) -> dict[str, float]:
        """kfree_skb drop reason -> drops/s over the window, when the eBPF probes were on."""
        counts: dict[str, int] = {}
        span = 0.0
        for s in self.samples[1:]:
            if s.ebpf is None:
                continue
            span += s.ebpf.window_s if s.ebpf.window_s > 0 else s.ebpf.elapsed_s
            for d in s.ebpf.drops:
                counts[d.reason] = counts.get(d.reason, 0) + d.count
        if span <= 0:
            return {}
        return {k: v / span for k, v in counts.items()}
