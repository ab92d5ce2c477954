"""The figures rules read: counter differences between the first and last sample of a window.

Averaging each tick's rates would cost one pass per tick over every CPU and IRQ; the
difference of two snapshots gives the same mean over the window in one pass, and only
for what a rule asks (each figure is computed on first use and kept). From ARRAYS_FROM
CPUs that pass is made on the snapshots' per-CPU columns (model/cpu_columns.py, which
the tick's rates gathered already for the newest snapshot), with the same expressions.
Counters that went backwards are judged by `model.counters.delta` (wrap or reset) as
the rates are.
"""

from __future__ import annotations

import operator
from itertools import compress
from typing import Any, Iterable, Mapping, Protocol, Sequence, cast

from nettop.ebpf.sample import EbpfSample
from nettop.model.counters import U32, U64, delta
from nettop.model.counts import CountMatrix, numpy, table_matrix
from nettop.model.cpu_columns import ARRAYS_FROM, EXACT, SOFTIRQS, SOFTNET, TIMES, columns
from nettop.model.snapshot import CpuTimes, Snapshot
from nettop.model.timeline import Event, Point
from nettop.ping.stats import LatencyStats


_FIRST = operator.itemgetter(0)


def _d(a: int, b: int, modulus: int) -> int:
    return b - a if b >= a else delta(a, b, modulus)[0]


def _cpu_pct_one(a: CpuTimes, b: CpuTimes) -> tuple[float, float, float] | None:
    total = b.total - a.total
    if total <= 0:
        return None
    return (100.0 * (b.softirq - a.softirq) / total, 100.0 * (b.irq - a.irq) / total,
            100.0 * (b.idle + b.iowait - a.idle - a.iowait) / total)


class _PctArrays:
    """`_cpu_pct`'s figures of every CPU of `after` as float64 arrays (a row per CPU),
    each column computed when first asked (coalescing wants only hardirq %)."""

    def __init__(self, cpus: tuple[int, ...], ta: Any, tb: Any, dt: Any, div: Any, keep: Any,
                 exact: Any) -> None:
        self.cpus = cpus
        self.keep = keep  # the rows with a figure: in `before` too, and time went by
        self.exact = exact  # the rows within 50 bits (else Python's ints judge them); None: every row
        self._ta, self._tb, self._dt, self._div = ta, tb, dt, div
        self._columns: list[Any] = [None, None, None]

    def column(self, k: int) -> Any:
        """0 softirq %, 1 hardirq %, 2 idle + iowait %: `_cpu_pct_one`'s expressions."""
        got = self._columns[k]
        if got is None:
            ta, tb, dt, div = self._ta, self._tb, self._dt, self._div
            if k == 0:  # cpu_columns.TIMES: user nice system idle iowait irq softirq steal
                got = 100.0 * dt[:, 6] / div
            elif k == 1:
                got = 100.0 * dt[:, 5] / div
            else:
                got = 100.0 * (tb[:, 3] + tb[:, 4] - ta[:, 3] - ta[:, 4]) / div
            self._columns[k] = got
        return got


def _cpu_pct_arrays(before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes]) -> _PctArrays | None:
    """The arrays `_cpu_pct` reads from ARRAYS_FROM CPUs (model/cpu_columns.py), with the
    same expressions in the same order, so the floats are those of `_cpu_pct_one`; None
    below that or when a count is no int within int64."""
    cb = columns(after, TIMES) if len(after) >= ARRAYS_FROM else None
    ca = columns(before, TIMES) if cb is not None else None
    if cb is None or ca is None:
        return None
    np = numpy()
    tb: Any = cb.values  # (numpy's stubs type a reduction as "bool | Any")
    ta, has = ca.aligned(cb.cpus)
    dt = tb - ta
    total = dt.sum(axis=1)
    exact = None
    # four reductions first: a mask of 1,024 x 8 twice over was ~45 us a tick more
    if not len(tb) or not (ta.min() > -EXACT and ta.max() < EXACT and tb.min() > -EXACT and tb.max() < EXACT):
        exact = ((ta > -EXACT) & (ta < EXACT) & (tb > -EXACT) & (tb < EXACT)).all(axis=1)
    keep = (total > 0) if has is None else has & (total > 0)
    return _PctArrays(cb.cpus, ta, tb, dt, np.where(keep, total, 1), keep, exact)


def _cpu_pct(before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes]) -> dict[int, tuple[float, float, float]]:
    """`Window.cpu_pct`: on arrays from ARRAYS_FROM CPUs (`_cpu_pct_arrays`), else CPU by CPU."""
    out: dict[int, tuple[float, float, float]] = {}
    arrays = _cpu_pct_arrays(before, after)
    if arrays is None:
        for cpu, b in after.items():
            a = before.get(cpu)
            if a is not None:
                got = _cpu_pct_one(a, b)
                if got is not None:
                    out[cpu] = got
        return out
    soft, hard, idle = (arrays.column(k).tolist() for k in range(3))
    if arrays.exact is None:  # C-level: a dict comprehension over 1,024 CPUs was ~0.1 ms a tick
        return dict(compress(zip(arrays.cpus, zip(soft, hard, idle)), arrays.keep.tolist()))
    for cpu, ok, k, s, h, i in zip(arrays.cpus, arrays.exact.tolist(), arrays.keep.tolist(), soft, hard, idle):
        if not ok:  # beyond 50 bits: Python's ints
            a = before.get(cpu)
            got = _cpu_pct_one(a, after[cpu]) if a is not None else None
            if got is not None:
                out[cpu] = got
        elif k:
            out[cpu] = (s, h, i)
    return out


class CpuLoads:
    """`Window.cpu_pct` asked for one CPU, or for the CPUs at or above a figure, with
    Python floats made only for those: the rules read a few CPUs' loads and test a NIC's
    peak CPUs against a floor, and the dict of all 1,024 was ~0.3 ms a tick."""

    def __init__(self, full: Mapping[int, tuple[float, float, float]] | None,
                 before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes]) -> None:
        """`full`: `cpu_pct` when it is there already (or must be: no arrays)."""
        self._full = full
        self._before, self._after = before, after
        self._arrays: _PctArrays | None = None
        self._arrays_done = False

    def get(self, cpu: int) -> tuple[float, float, float] | None:
        """`cpu_pct().get(cpu)`: `_cpu_pct_one` of that CPU, which is what every path of
        `_cpu_pct` gives it (the arrays' floats are its floats); no arrays, no dict of
        1,024 rows to find one (~0.1 ms a tick on a cold cache)."""
        if self._full is not None:
            return self._full.get(cpu)
        a, b = self._before.get(cpu), self._after.get(cpu)
        return _cpu_pct_one(a, b) if a is not None and b is not None else None

    def _arrays_or_none(self) -> _PctArrays | None:
        if not self._arrays_done:
            self._arrays = _cpu_pct_arrays(self._before, self._after) if self._full is None else None
            self._arrays_done = True
        return self._arrays

    def _row(self, r: int) -> tuple[float, float, float] | None:
        a = self._arrays
        assert a is not None
        if a.exact is not None and not a.exact[r]:  # beyond 50 bits: Python's ints
            cpu = a.cpus[r]
            before = self._before.get(cpu)
            return _cpu_pct_one(before, self._after[cpu]) if before is not None else None
        if not a.keep[r]:
            return None
        return (a.column(0).item(r), a.column(1).item(r), a.column(2).item(r))

    def at_least(self, k: int, floor: float) -> dict[int, tuple[float, float, float]]:
        """`{cpu: v for cpu, v in cpu_pct().items() if v[k] >= floor}`, in that order."""
        a = self._arrays_or_none()
        if a is None:
            full = self._full if self._full is not None else _cpu_pct(self._before, self._after)
            return {cpu: v for cpu, v in full.items() if v[k] >= floor}
        np = numpy()
        ok = a.keep if a.exact is None else a.keep & a.exact
        at = np.flatnonzero(ok & (a.column(k) >= floor))
        rows = at.tolist()  # C-level: an idle host's 1,000 CPUs at or above 50 % idle
        figures = list(zip(*(a.column(j)[at].tolist() for j in range(3))))
        if a.exact is not None:  # and those beyond 50 bits that reach it, in the CPUs' order
            odd = [(r, v) for r in np.flatnonzero(~a.exact).tolist()
                   if (v := self._row(r)) is not None and v[k] >= floor]
            if odd:
                pairs = sorted([*zip(rows, figures), *odd], key=_FIRST)
                rows, figures = [r for r, _ in pairs], [v for _, v in pairs]
        return dict(zip(map(a.cpus.__getitem__, rows), figures))


def _per_s(before: Mapping[int, Any], after: Mapping[int, Any], fields: tuple[str, ...], n: int,
           elapsed: float) -> dict[int, tuple[float, ...]]:
    """CPU -> the first `n` of `fields` per second, for the CPUs of `after` that `before`
    has, each as `_d(a, b, U32) / elapsed`; on arrays from ARRAYS_FROM CPUs, where only
    the CPUs with a count backwards or beyond 50 bits are judged one by one."""
    get = operator.attrgetter(*fields[:n])
    cb = columns(after, fields) if len(after) >= ARRAYS_FROM else None
    ca = columns(before, fields) if cb is not None else None
    if cb is None or ca is None:
        out: dict[int, tuple[float, ...]] = {}
        for cpu, b in after.items():
            a = before.get(cpu)
            if a is not None:
                out[cpu] = _per_s_one(get, a, b, n, elapsed)
        return out
    vb: Any = cb.values[:, :n]
    va, has = ca.aligned(cb.cpus)
    va = va[:, :n]
    plain = ((va >= 0) & (va <= vb) & (vb < EXACT)).all(axis=1)
    per_s = (vb - va) / elapsed
    rates = list(zip(*(per_s[:, i].tolist() for i in range(n))))  # no list per CPU on the way
    if has is None and plain.all():
        return dict(zip(cb.cpus, rates))
    out = {}
    there = has.tolist() if has is not None else [True] * len(rates)
    for cpu, ok, rate, known in zip(cb.cpus, plain.tolist(), rates, there):
        if known:  # not `ok`: a count backwards or beyond 50 bits, for `_d` to judge
            out[cpu] = rate if ok else _per_s_one(get, before[cpu], after[cpu], n, elapsed)
    return out


def _rate_column(before: Mapping[int, Any], after: Mapping[int, Any], fields: tuple[str, ...], k: int,
                 elapsed: float) -> tuple[tuple[int, ...], Any] | None:
    """(the CPUs of `after`, `fields[k]` per second of each as a float64 array): what
    `_per_s` gives for that field, when both mappings have arrays of the same CPUs and
    that field counted forwards within 50 bits on every one of them; else None.

    `_per_s` judges a CPU by its first n fields together, but a field that counted
    forwards is `(b - a) / elapsed` either way (an int below 2**50 is exact as a float),
    so one column's array is that field's figure even when another field went backwards.
    A rule that wants one field of a few CPUs thus skips the ~0.25 ms a tick of 1,024
    tuples and a dict (softnet at 1,024 CPUs)."""
    cb = columns(after, fields) if len(after) >= ARRAYS_FROM else None
    ca = columns(before, fields) if cb is not None else None
    if cb is None or ca is None or ca.cpus != cb.cpus or not cb.cpus:
        return None
    vb: Any = cb.values[:, k]
    va: Any = ca.values[:, k]
    # three reductions, not a mask per CPU: every CPU plain or the caller walks them all
    if int(va.min()) < 0 or int(vb.max()) >= EXACT or not bool((va <= vb).all()):
        return None
    return cb.cpus, (vb - va) / elapsed


def _per_s_one(get: Any, a: Any, b: Any, n: int, elapsed: float) -> tuple[float, ...]:
    xs, ys = get(a), get(b)
    if n == 1:
        return (_d(xs, ys, U32) / elapsed,)
    return tuple(_d(x, y, U32) / elapsed for x, y in zip(xs, ys))


# A window's interrupts are kept as the counts that moved while at most this many per
# IRQ moved (a queue IRQ fires on a CPU or a few of 1,024); beyond, as the whole matrix.
SPARSE_PER_ROW = 8


class _Steps:
    """The window's interrupts of each IRQ (a row) on each CPU (a column): the steps of
    two uint32 count matrices, a count's step judged as `_d` judges it (a wrap near the
    top of 32 bits, else a reset from 0)."""

    ncols: int

    def row(self, r: int) -> list[int]:
        raise NotImplementedError

    def sum_rows(self, rows: list[int]) -> list[int]:
        """The per-CPU sum of `rows` (a row named twice counts twice)."""
        return cast("list[int]", self.sum_rows_array(rows).tolist())

    def sum_rows_array(self, rows: list[int]) -> Any:
        """`sum_rows` as an integer array."""
        raise NotImplementedError

    def peaks(self) -> tuple[list[int], list[int]]:
        """Each row's total and its first column with the most interrupts."""
        raise NotImplementedError


class _DenseSteps(_Steps):
    """Every step, uint32 as the counts (a 32-bit count's step fits)."""

    def __init__(self, va: Any, vb: Any) -> None:
        d = vb - va  # uint32: a wrap's step is the difference modulo 2**32
        back = vb < va
        if back.any():  # as `_d`: a wrap near the top of 32 bits, else a reset from 0
            reset = back & ~((va >= U32 - (U32 >> 2)) & (vb < (U32 >> 2)))
            d[reset] = vb[reset]
        self.d = d
        self.ncols = int(d.shape[1])

    def row(self, r: int) -> list[int]:
        return cast("list[int]", self.d[r].tolist())

    def sum_rows_array(self, rows: list[int]) -> Any:
        lo, hi = min(rows), max(rows)
        # a NIC's queue IRQs are usually adjacent rows: a slice, not a copy of them
        block = self.d[lo:hi + 1] if hi - lo + 1 == len(rows) == len(set(rows)) else self.d[rows]
        return block.sum(axis=0)

    def peaks(self) -> tuple[list[int], list[int]]:
        return self.d.sum(axis=1).tolist(), self.d.argmax(axis=1).tolist()


class _SparseSteps(_Steps):
    """Only the counts that moved: (row, column, step) in row-major order. On 516 queue
    IRQs x 1,024 CPUs a dense window was a 2 MB matrix written and read three times a
    tick for ~2,000 counts that moved; the figures are the same ints (sums stay far
    below 2**53, so float64 adds them exactly)."""

    def __init__(self, rows: Any, cols: Any, steps: Any, nrows: int, ncols: int) -> None:
        self.rows, self.cols, self.steps = rows, cols, steps
        self.nrows, self.ncols = nrows, ncols

    def row(self, r: int) -> list[int]:
        np = numpy()
        lo, hi = np.searchsorted(self.rows, [r, r + 1]).tolist()
        out = [0] * self.ncols
        for c, v in zip(self.cols[lo:hi].tolist(), self.steps[lo:hi].tolist()):
            out[c] = v
        return out

    def sum_rows_array(self, rows: list[int]) -> Any:
        np = numpy()
        times = np.bincount(np.asarray(rows, np.int64), minlength=self.nrows)[self.rows]
        got = np.bincount(self.cols, weights=self.steps * times, minlength=self.ncols)
        return got.astype(np.int64)

    def peaks(self) -> tuple[list[int], list[int]]:
        np = numpy()
        totals = np.bincount(self.rows, weights=self.steps, minlength=self.nrows).astype(np.int64)
        # each row's largest step, the lowest column first; a row of zeros peaks at column 0
        order = np.lexsort((self.cols, -self.steps, self.rows))
        r = self.rows[order]
        first = order[np.concatenate(([True], r[1:] != r[:-1]))] if len(r) else order
        first = first[self.steps[first] > 0]
        peak = np.zeros(self.nrows, np.int64)
        peak[self.rows[first]] = self.cols[first]
        return totals.tolist(), peak.tolist()


def _steps(va: Any, vb: Any) -> _Steps:
    """The window's interrupts between two count matrices of the same layout."""
    np = numpy()
    nrows, ncols = va.shape
    a, b = va.ravel(), vb.ravel()
    moved = np.flatnonzero(b != a)
    if len(moved) > SPARSE_PER_ROW * nrows:
        return _DenseSteps(va, vb)
    x, y = a[moved].astype(np.int64), b[moved].astype(np.int64)
    d = y - x
    back = d < 0
    if back.any():  # as `_d`: a wrap near the top of 32 bits, else a reset from 0
        wrap = back & (x >= U32 - (U32 >> 2)) & (y < (U32 >> 2))
        d = np.where(wrap, d + U32, np.where(back, y, d))
    rows, cols = np.divmod(moved, ncols)
    return _SparseSteps(rows, cols, d, nrows, ncols)


class Sample(Protocol):
    """What the rules read of every tick in the window, not only of its first and last:
    the probes' figures, each of the interval that ended with that tick."""

    @property
    def t_mono(self) -> float: ...

    @property
    def latency(self) -> Mapping[str, LatencyStats]: ...

    @property
    def ebpf(self) -> EbpfSample | None: ...


class Window:
    """The last `window_s` seconds of a timeline, as seen by the rules."""

    def __init__(self, points: Sequence[Point], window_s: float = 5.0,
                 events: Iterable[Event] = (), idle_rtt: Mapping[str, float] | None = None,
                 samples: Iterable[Sample] | None = None) -> None:
        """`samples`: every tick's probe figures (latency, eBPF), when `points` holds only
        some of the ticks whole (a Watch at a sub-second interval); else the points' own."""
        if not points:
            raise ValueError("a window needs at least one sample")
        self.last: Snapshot = points[-1].snapshot
        first = self.last
        i = len(points) - 1
        while i > 0 and self.last.t_mono - points[i - 1].snapshot.t_mono <= window_s + 1e-6:
            i -= 1
            first = points[i].snapshot
        self.first = first
        # from the first sample on (its own figures are of the interval before the window)
        self.samples: list[Sample] = ([p.snapshot for p in points[i:]] if samples is None
                                      else [s for s in samples if first.t_mono <= s.t_mono <= self.last.t_mono])
        self.history = points  # for baselines (idle RTT) over all the timeline holds
        self.events = list(events)
        self._idle_rtt = idle_rtt  # a running minimum kept by a Watch, else the history's
        self.elapsed = self.last.t_mono - self.first.t_mono
        # each figure the rules ask for, computed at most once per window; one typed slot
        # per kind, so what a method returns is what it stored
        self._cpu_pct: dict[int, tuple[float, float, float]] | None = None
        self._cpu_loads: CpuLoads | None = None  # see cpu_loads
        self._softnet: dict[int, tuple[float, float, float, float]] | None = None
        self._net_rx: dict[int, float] | None = None
        self._irq_counts: dict[int, list[int] | None] = {}
        self._irq_m: tuple[CountMatrix, _Steps] | None = None  # see _irq_matrix
        self._irq_m_done = False
        self._irq_peaks: tuple[list[int], list[int]] | None = None  # rows' totals and argmax
        self._irq_pairs: list[tuple[int, int]] | None = None  # the same as (total, argmax) per row

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
            self._cpu_pct = got = _cpu_pct(self.first.cpu_times, self.last.cpu_times)
        return got

    def cpu_loads(self) -> CpuLoads:
        """`cpu_pct` asked for one CPU or for the CPUs at or above a figure, Python floats
        made only for those (from ARRAYS_FROM CPUs). Without arrays it holds `cpu_pct`,
        computed here as a rule that called `cpu_pct` at its start did."""
        got = self._cpu_loads
        if got is None:
            before, after = self.first.cpu_times, self.last.cpu_times
            # the dict when it is there, or when there are no arrays to read instead (then
            # computed here, where a rule that read cpu_pct computed it)
            full: Mapping[int, tuple[float, float, float]] | None = self._cpu_pct
            if full is None and (len(after) < ARRAYS_FROM or columns(after, TIMES) is None
                                 or columns(before, TIMES) is None):
                full = self.cpu_pct()
            self._cpu_loads = got = CpuLoads(full, before, after)
        return got

    def softnet(self) -> Mapping[int, tuple[float, float, float, float]]:
        """CPU -> (processed/s, dropped/s, time_squeeze/s, received_rps/s)."""
        got = self._softnet
        if got is None:
            four = _per_s(self.first.softnet, self.last.softnet, SOFTNET, 4, self.elapsed) if self.has_rates else {}
            self._softnet = got = cast("dict[int, tuple[float, float, float, float]]", four)
        return got

    def softnet_above_zero(self, k: int) -> dict[int, float] | None:
        """CPU -> the k-th figure of `softnet` (1 dropped/s, 2 time_squeeze/s) of the CPUs
        where it is above 0, in `softnet`'s order, from that one column of the arrays
        (`_rate_column`); None when `softnet` itself must tell. A rule wants the few CPUs
        that drop or squeeze, not 1,024 CPUs' four figures (~0.3 ms a tick)."""
        if self._softnet is not None or not self.has_rates:
            return None
        col = _rate_column(self.first.softnet, self.last.softnet, SOFTNET, k, self.elapsed)
        if col is None:
            return None
        cpus, rates = col
        at = numpy().flatnonzero(rates > 0)
        return dict(zip(map(cpus.__getitem__, at.tolist()), rates[at].tolist()))

    def net_rx(self) -> Mapping[int, float]:
        """CPU -> NET_RX softirqs/s."""
        got = self._net_rx
        if got is None:
            got = {}
            col = _rate_column(self.first.softirqs, self.last.softirqs, SOFTIRQS, 0,
                               self.elapsed) if self.has_rates else None
            if col is not None:  # no 1-tuple per CPU on the way (~0.1 ms a tick at 1,024 CPUs)
                got = dict(zip(col[0], col[1].tolist()))
            elif self.has_rates:
                one = _per_s(self.first.softirqs, self.last.softirqs, SOFTIRQS, 1, self.elapsed)
                got = dict(zip(one, map(_FIRST, one.values())))
            self._net_rx = got
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
                out = m[1].row(row)
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
        acc: list[int] | None = None
        irqs = irqs if isinstance(irqs, (list, tuple)) else list(irqs)
        at = m[0].rows_of(irqs) if m is not None else [None] * len(irqs)  # in one pass
        rows = [r for r in at if r is not None]
        missing = [irq for irq, r in zip(irqs, at) if r is None] if len(rows) < len(at) else []
        for irq in missing:  # not in both samples' matrices: per-IRQ lists
            d = self.irq_counts(irq)
            if d is not None:
                acc = d if acc is None else list(map(operator.add, acc, d))
        if rows and m is not None:
            got = m[1].sum_rows(rows)
            acc = got if acc is None else list(map(operator.add, acc, got))
        return acc

    def irq_sum_top(self, irqs: list[int]) -> tuple[int, int, int] | None:
        """(sum(acc), acc.index(max(acc)), max(acc)) of `acc = irq_sum(irqs)`: a NIC's
        interrupts in all, the index in `cpus` of the first CPU where most landed, how
        many; None when `acc` is None or empty. On the matrix when every IRQ is a row of
        it: the sum and argmax in numpy, not a list of 1,024 ints walked three times per
        NIC (~0.15 ms a tick at 4 NICs)."""
        m = self._irq_matrix()
        if m is not None and m[1].ncols and irqs:
            rows = m[0].rows_of(irqs)
            if None not in rows:
                got = m[1].sum_rows_array(cast("list[int]", rows))
                i = int(got.argmax())  # the first of the largest, as list.index(max())
                return int(got.sum()), i, int(got[i])
        acc = self.irq_sum(irqs)
        if not acc:
            return None
        most = max(acc)
        return sum(acc), acc.index(most), most

    def irq_peak(self, irq: int) -> tuple[int, int] | None:
        """(all interrupts of one IRQ over the window, the index in `cpus` where most
        landed), or None when unknown."""
        m = self._irq_matrix()
        row = m[0].index(irq) if m is not None else None
        if m is not None and row is not None:
            if not m[1].ncols:
                return None  # no CPU columns: as an empty list below
            if self._irq_peaks is None:
                self._irq_peaks = m[1].peaks()
            totals, peaks = self._irq_peaks
            return totals[row], peaks[row]
        d = self.irq_counts(irq)
        if not d:
            return None
        return sum(d), d.index(max(d))

    def irq_peaks(self, irqs: Iterable[int]) -> list[tuple[int, int] | None]:
        """`irq_peak` of each of `irqs` (a NIC's 256 queue IRQs in one call)."""
        m = self._irq_matrix()
        if m is None or not m[1].ncols:
            return [self.irq_peak(irq) for irq in irqs]
        if self._irq_peaks is None:
            self._irq_peaks = m[1].peaks()
        if self._irq_pairs is None:
            self._irq_pairs = list(zip(*self._irq_peaks))
        irqs = irqs if isinstance(irqs, (list, tuple)) else list(irqs)
        rows = m[0].rows_of(irqs)
        if None not in rows:  # every one a row of the matrix: one C-level pass
            return list(map(self._irq_pairs.__getitem__, cast("list[int]", rows)))
        pairs = self._irq_pairs
        return [pairs[row] if row is not None else self.irq_peak(irq) for irq, row in zip(irqs, rows)]

    def _irq_matrix(self) -> tuple[CountMatrix, _Steps] | None:
        """(the last sample's count matrix, whose `index` gives an IRQ's row; the window's
        per-CPU interrupts in its rows) when both samples' counts are one count matrix
        each, of the same IRQs and CPUs (model/counts.py); else None (per-IRQ lists)."""
        if self._irq_m_done:
            return self._irq_m
        self._irq_m_done = True
        got: tuple[CountMatrix, _Steps] | None = None
        a, b = self.first.interrupts, self.last.interrupts
        ma, mb = table_matrix(a), table_matrix(b)
        if (ma is not None and mb is not None and ma.same_layout(mb) and a.cpus == b.cpus
                and self.has_rates):
            got = (mb, _steps(ma.values, mb.values))
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
