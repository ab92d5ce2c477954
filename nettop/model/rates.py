"""Rates: pure functions of two snapshots.

Nothing here reads the kernel or the clock. Elapsed time is the difference of the
snapshots' monotonic timestamps, never the nominal interval, so a late tick shows true
rates. Things that exist in only one of the two snapshots are marked (`Presence`)
instead of producing nonsense: a new interface has no rate yet, a vanished IRQ is
reported gone, a counter that was reset is flagged.

Nothing here raises on bad counters either (a corrupt recording or captured tree can
hold anything): a counter outside its width has no rate, and what cannot be right (a
count outside its width, a per-CPU count that went backwards, more CPU time than the
wall clock allows) is listed in `Rates.problems`, which the JSON and the reports show.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, TypeVar, ValuesView

from nettop.model.counters import U32, U64, Step, delta
from nettop.model.counts import numpy, table_matrix
from nettop.model.cpu_columns import ARRAYS_FROM, EXACT, SOFTIRQS, SOFTNET, TIMES, columns
from nettop.model.cpu_table import CpuTable
from nettop.model.problems import Problem
from nettop.model.snapshot import CpuTimes, InterruptTable, Irq, LinkStats, QueueCounters, Snapshot

K = TypeVar("K")
V = TypeVar("V")


class Presence(Enum):
    BOTH = "ok"
    NEW = "new"  # only in the later snapshot: no rate yet
    GONE = "gone"  # only in the earlier snapshot
    OFFLINE = "offline"  # a CPU some file lists but cpu/online does not: no figures


@dataclass(frozen=True, slots=True)
class CpuRates:
    cpu: int
    presence: Presence
    user_pct: float | None = None
    system_pct: float | None = None
    idle_pct: float | None = None
    iowait_pct: float | None = None
    irq_pct: float | None = None
    softirq_pct: float | None = None
    steal_pct: float | None = None
    net_rx_per_s: float | None = None
    net_tx_per_s: float | None = None
    softnet_processed_per_s: float | None = None
    softnet_dropped_per_s: float | None = None
    time_squeeze_per_s: float | None = None
    received_rps_per_s: float | None = None
    flow_limit_per_s: float | None = None
    backlog: int | None = None
    reset: bool = False  # some counter of this CPU went backwards (offlined and back)


@dataclass(frozen=True, slots=True)
class IrqRates:
    irq: int
    presence: Presence
    per_s: float | None = None
    per_cpu_per_s: Mapping[int, float] = field(default_factory=dict)
    reset: bool = False


@dataclass(frozen=True, slots=True)
class QueueRates:
    kind: str
    index: int
    packets_per_s: float | None = None
    bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class LinkRates:
    name: str
    presence: Presence
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None
    rx_packets_per_s: float | None = None
    tx_packets_per_s: float | None = None
    rx_errors_per_s: float | None = None
    tx_errors_per_s: float | None = None
    rx_dropped_per_s: float | None = None
    tx_dropped_per_s: float | None = None
    queues: tuple[QueueRates, ...] = ()
    reset: bool = False


@dataclass(frozen=True, slots=True)
class QdiscRates:
    ifname: str
    handle: str
    parent: str
    kind: str
    bytes_per_s: float | None = None
    packets_per_s: float | None = None
    drops_per_s: float | None = None
    overlimits_per_s: float | None = None
    requeues_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class Rates:
    """Every rate nettop shows for the interval between two snapshots."""

    t_wall: float
    elapsed_s: float
    cpus: Mapping[int, CpuRates]
    irqs: Mapping[int, IrqRates]
    links: Mapping[str, LinkRates]
    qdiscs: Mapping[str, tuple[QdiscRates, ...]]
    sampler_cpu_pct: float | None = None  # nettop's own sampling cost
    # What the two snapshots say that cannot be right (see the module docstring)
    problems: tuple[Problem, ...] = ()


class _Out(Exception):
    """A counter outside its width: no rate can be given."""


def _per_s(prev: int, cur: int, elapsed: float, modulus: int) -> tuple[float, bool]:
    """Rate and whether the counter was reset; _Out when either value is not a counter."""
    if not (0 <= prev < modulus and 0 <= cur < modulus):
        raise _Out
    if cur >= prev:  # nearly always: no wrap or reset to judge
        return (cur - prev) / elapsed, False
    d, step = delta(prev, cur, modulus)
    return d / elapsed, step is Step.RESET


def _maybe_per_s(prev: int, cur: int, elapsed: float, modulus: int) -> float | None:
    try:
        return _per_s(prev, cur, elapsed, modulus)[0]
    except _Out:
        return None


_SOFTNET_RATES = ("softnet_processed_per_s", "softnet_dropped_per_s", "time_squeeze_per_s",
                  "received_rps_per_s", "flow_limit_per_s")
_SOFTNET = operator.attrgetter("processed", "dropped", "time_squeeze", "received_rps", "flow_limit_count")


def cpu_rates(prev: Snapshot, cur: Snapshot, elapsed: float,
              problems: list[Problem] | None = None) -> Mapping[int, CpuRates]:
    if problems is None:
        problems = []
    cpus, offline = _cpu_set(cur.online_cpus, cur.cpu_times, prev.cpu_times)
    if len(cpus) >= ARRAYS_FROM and elapsed > 0 and math.isfinite(elapsed):
        got = _cpu_rates_arrays(prev, cur, elapsed, problems, cpus, offline)
        if got is not None:
            return got
    return _cpu_rates_each(prev, cur, elapsed, problems, cpus)


# The last answer of _cpu_set for two tables' CPU ids (CpuTable.cpus) and the online
# list: the same three tick after tick, so at 1,024 CPUs the union, its sort and the
# offline mask (~0.4 ms a tick) are made when they change, not every tick. One tuple,
# replaced whole: a reader on another thread sees an old answer or the new one.
_CPU_SET: tuple[Any, ...] = (None, None, None, [], None)


def _cpu_set(online: tuple[int, ...], times: Mapping[int, CpuTimes], before: Mapping[int, CpuTimes]
             ) -> tuple[list[int], Any]:
    """(every CPU online or in either sample's /proc/stat, ascending; the mask of those
    not online when both samples' times are `CpuTable`s of ARRAYS_FROM CPUs or more, else
    None, and `_cpu_rates_arrays` makes it if it needs it)."""
    global _CPU_SET
    a = times.cpus if type(times) is CpuTable else None
    b = before.cpus if type(before) is CpuTable else None
    kept = _CPU_SET
    if a is not None and b is not None and kept[0] == online and kept[1] == a and kept[2] == b:
        return kept[3], kept[4]
    cpus = sorted(set(online) | set(times) | set(before))
    offline = None
    if a is not None and b is not None and len(cpus) >= ARRAYS_FROM:
        np = numpy()  # loaded already: a CpuTable is an array
        up = set(online)
        offline = np.fromiter((c not in up for c in cpus), bool, len(cpus))
        offline.flags.writeable = False
        _CPU_SET = (online, a, b, cpus, offline)
    return cpus, offline


def _cpu_rates_each(prev: Snapshot, cur: Snapshot, elapsed: float, problems: list[Problem],
                    cpus: list[int]) -> dict[int, CpuRates]:
    """`cpu_rates` one CPU at a time: the reference the arrays must equal."""
    out: dict[int, CpuRates] = {}
    for cpu in cpus:
        got = _one_cpu(prev, cur, cpu, elapsed, problems)
        if got is not None:
            out[cpu] = got
    return out


def _one_cpu(prev: Snapshot, cur: Snapshot, cpu: int, elapsed: float,
             problems: list[Problem]) -> CpuRates | None:
    a, b = prev.cpu_times.get(cpu), cur.cpu_times.get(cpu)
    if b is None and a is None and cpu not in cur.softnet:
        return None
    # a CPU is there when /proc/stat or softnet_stat lists it: a sosreport keeps no
    # /proc/stat, and its CPUs were shown "gone" while their softnet totals were read
    had, has = a is not None or cpu in prev.softnet, b is not None or cpu in cur.softnet
    presence = Presence.BOTH if (had and has) else (Presence.NEW if has else Presence.GONE)
    if b is not None and cur.online_cpus and cpu not in cur.online_cpus:
        # listed by /proc/stat or softnet_stat but offline by sysfs (a captured tree
        # taken file by file, or a CPU going down mid-read): its figures are not shown
        return CpuRates(cpu=cpu, presence=Presence.OFFLINE)
    fields: dict[str, float | int | bool | None] = {}
    reset = False
    if a and b:
        pcts, reset = _time_split(a, b, elapsed, problems)
        fields.update(pcts)
    sa, sb = prev.softirqs.get(cpu), cur.softirqs.get(cpu)
    if sa and sb:
        for name, x, y in (("net_rx_per_s", sa.net_rx, sb.net_rx), ("net_tx_per_s", sa.net_tx, sb.net_tx)):
            if 0 <= x <= y < U32:  # inline: only a backwards or corrupt count needs _counter
                fields[name] = (y - x) / elapsed
                continue
            fields[name], r = _counter(f"/proc/softirqs {name[:6].upper()} on CPU {cpu}",
                                       x, y, elapsed, problems)
            reset |= r
    na, nb = prev.softnet.get(cpu), cur.softnet.get(cpu)
    if na and nb:
        for name, x, y in zip(_SOFTNET_RATES, _SOFTNET(na), _SOFTNET(nb)):
            if 0 <= x <= y < U32:
                fields[name] = (y - x) / elapsed
                continue
            fields[name], r = _counter(f"softnet_stat {name[:-6]} on CPU {cpu}",
                                       x, y, elapsed, problems)
            reset |= r
    # backlog is a gauge (an int), not a rate: named, so `fields` holds only rates
    return CpuRates(cpu=cpu, presence=presence, reset=reset,
                    backlog=nb.backlog if nb is not None else None, **fields)


_PRESENCE = (Presence.GONE, Presence.NEW, Presence.GONE, Presence.BOTH)  # by 2 * had + has
_TIME_PCT = [0, 2, 3, 4, 5, 6, 7]  # _TIME_FIELDS among cpu_columns.TIMES (nice is only in the total)


def _cpu_rates_arrays(prev: Snapshot, cur: Snapshot, elapsed: float, problems: list[Problem],
                      cpus: list[int], offline: Any = None) -> RatesTable[int, CpuRates] | None:
    """`_cpu_rates_each` on arrays: every CPU whose counts need no judging (online, each
    32-bit count within its width and not backwards, the times within 50 bits and no
    more ticks than the clock allows) is computed at once, with the same expressions in
    the same order, so the floats are those of the per-CPU path; the others (offline, a
    step backwards, a corrupt count) go through `_one_cpu` in CPU order, so the problems
    are the same problems in the same order; their CpuRates are built when first read
    (`RatesTable`). None when a snapshot holds a value that is not an int within
    int64: then every CPU takes the per-CPU path. `offline`: which of `cpus` are not
    among cur's online CPUs, when the caller has it (`_cpu_set`)."""
    np = numpy()
    got = [columns(m, f) for m, f in ((prev.cpu_times, TIMES), (cur.cpu_times, TIMES),
                                       (prev.softirqs, SOFTIRQS), (cur.softirqs, SOFTIRQS),
                                       (prev.softnet, SOFTNET), (cur.softnet, SOFTNET))]
    if any(c is None for c in got):
        return None
    n = len(cpus)
    all_in = np.ones(n, bool)
    (ta, ha), (tb, hb), (sa, hsa), (sb, hsb), (na, hna), (nb, hnb) = (
        c.aligned(cpus) for c in got if c is not None)
    has_ta, has_tb = all_in if ha is None else ha, all_in if hb is None else hb
    has_na, has_nb = all_in if hna is None else hna, all_in if hnb is None else hnb
    both_t = has_ta & has_tb
    both_s = (all_in if hsa is None else hsa) & (all_in if hsb is None else hsb)
    both_n = has_na & has_nb

    # /proc/stat: _time_split's checks, then its shares of the total (or no split: zeros,
    # a reset when the total went backwards)
    dt = tb - ta
    total = dt.sum(axis=1)
    zero = (dt < 0).any(axis=1) | (total <= 0)
    ok_t = (((ta >= 0) & (ta < EXACT) & (tb >= 0) & (tb < EXACT)).all(axis=1)
            & (zero | ~(total > _USER_HZ * (elapsed * _TICK_SLACK + _READ_SKEW_S) + 2)))
    pct = np.where(zero[:, None], 0.0, 100.0 * dt[:, _TIME_PCT] / np.where(zero, 1, total)[:, None])
    reset = both_t & zero & (total < 0)
    # the 32-bit counters: the inline check of `_one_cpu`
    ok_s = ((0 <= sa) & (sa <= sb) & (sb < U32)).all(axis=1)
    ok_n = ((0 <= na) & (na <= nb) & (nb < U32)).all(axis=1)
    s_per_s = (sb - sa) / elapsed
    n_per_s = (nb - na) / elapsed

    skip = ~(has_ta | has_tb | has_nb)
    slow = both_t & ~ok_t | both_s & ~ok_s | both_n & ~ok_n
    if cur.online_cpus:
        if offline is None:
            online = set(cur.online_cpus)
            offline = np.fromiter((c not in online for c in cpus), bool, n)
        slow |= has_tb & offline
    codes = 2 * (has_ta | has_na) + (has_tb | has_nb)
    judged: dict[int, CpuRates | None] = {}  # index -> its `_one_cpu`, None: left out
    for i in np.flatnonzero(skip | slow).tolist():
        cpu = cpus[i]
        if skip[i]:
            judged[i] = None
            continue
        one = _one_cpu(prev, cur, cpu, elapsed, problems)
        assert one is not None  # only a CPU in none of the three is left out
        judged[i] = one
    return RatesTable(_build_cpu_rates, cpus, codes, pct, both_t, s_per_s, both_s, n_per_s, both_n, reset,
                      cur.softnet, judged, columns=_cpu_rate_columns)


class RatesTable(Mapping[K, V]):
    """Rates of many CPUs or IRQs, kept as the arrays they were computed on until read.

    At 1,024 CPUs the CpuRates and IrqRates objects cost more than their arithmetic
    (~3 ms a tick), and `nettop record` never reads them (the doctor reads the
    snapshots, recordings store no Rates). This keeps what `build` needs (arrays; what
    had to be judged one by one was judged, and its problems told, at once) and makes
    the dict the first time anything is asked of it; from then on it reads as that dict
    (equal to it, pickled as it)."""

    __slots__ = ("_build", "_parts", "_built", "_lock", "_columns")

    def __init__(self, build: Callable[..., dict[K, V]], *parts: Any,
                 columns: Callable[..., tuple[list[K], list[list[Any]]] | None] | None = None) -> None:
        self._build: Callable[..., dict[K, V]] | None = build
        self._parts: tuple[Any, ...] | None = parts
        self._built: dict[K, V] | None = None
        self._lock = threading.Lock()
        # (names, *parts) -> what `columns` gives, from the arrays; None: made from the dict
        self._columns = columns

    def columns(self, *names: str) -> tuple[list[K], list[list[Any]]]:
        """The keys, and for each of `names` that field of every value, in the dict's
        order: `[getattr(v, name) for v in self.values()]`, the same objects and floats.
        While the dict is not made, from the arrays, without making it: the live view's
        heatmap and its before/after digest read a few fields of every CPU each tick, and
        at 256 and 1,024 CPUs making the CpuRates cost more than the rest of their tick's
        rates."""
        with self._lock:
            built, parts = self._built, self._parts
        if built is None and parts is not None and self._columns is not None:
            got = self._columns(names, *parts)
            if got is not None:
                return got
        return _dict_columns(self._dict(), names)

    def _dict(self) -> dict[K, V]:
        got = self._built
        if got is None:
            with self._lock:  # the sampler thread and a reader may ask at once
                got = self._built
                if got is None:
                    assert self._build is not None and self._parts is not None
                    got = self._built = self._build(*self._parts)
                    self._build = self._parts = None  # the arrays are no longer needed
        return got

    def __getitem__(self, key: K) -> V:
        return self._dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._dict()

    def __iter__(self) -> Iterator[K]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def keys(self) -> KeysView[K]:
        return self._dict().keys()

    def values(self) -> ValuesView[V]:
        return self._dict().values()

    def items(self) -> ItemsView[K, V]:
        return self._dict().items()

    def get(self, key: K, default: Any = None) -> Any:
        return self._dict().get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RatesTable):
            return self._dict() == other._dict()
        if isinstance(other, Mapping):
            return self._dict() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a dict's

    def __repr__(self) -> str:
        return f"RatesTable({self._dict()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (self._dict(),))


def _build_cpu_rates(*parts: Any) -> dict[int, CpuRates]:
    """The CpuRates of `_cpu_rates_arrays`' `RatesTable` (`parts` are its arrays): a
    CpuRates per CPU from the arrays' columns, the judged CPUs' own values in their place
    (or left out)."""
    keys, cols = _cpu_rate_columns(_CPU_FIELDS, *parts)
    return dict(zip(keys, map(CpuRates, *cols)))


# where each CpuRates field comes from in `_build_cpu_rates`: its place among the
# positional arguments cpu, presence, the _TIME_PCT shares, SOFTIRQS, SOFTNET, backlog, reset
_CPU_FIELDS = tuple(f.name for f in dataclasses.fields(CpuRates))
assert len(_CPU_FIELDS) == 2 + len(_TIME_PCT) + len(SOFTIRQS) + len(SOFTNET) + 2


def _cpu_rate_columns(names: tuple[str, ...], cpus: list[int], codes: Any, pct: Any, both_t: Any, s_per_s: Any,
                      both_s: Any, n_per_s: Any, both_n: Any, reset: Any, softnet: Mapping[int, Any],
                      judged: dict[int, CpuRates | None]) -> tuple[list[int], list[list[Any]]]:
    """`RatesTable.columns` of `_cpu_rates_arrays`' table, from its arrays (and so the
    fields `_build_cpu_rates` makes its CpuRates of): each field's column for every CPU
    (`.tolist()` of its array slice, None where the CPU lacks the figure), then the
    judged CPUs' own values in their place and the CPUs left out dropped."""
    n_pct, n_soft = len(_TIME_PCT), len(SOFTIRQS)

    def col(values: Any, present: Any) -> list[Any]:
        got = values.tolist()
        if present.all():
            return got
        return [v if p else None for v, p in zip(got, present.tolist())]

    def base(name: str) -> list[Any]:
        if name not in _CPU_FIELDS:
            raise AttributeError(f"CpuRates has no field {name!r}")
        at = _CPU_FIELDS.index(name)
        if at == 0:
            return list(cpus)
        if at == 1:
            return list(map(_PRESENCE.__getitem__, codes.tolist()))
        at -= 2
        if at < n_pct:
            return col(pct[:, at], both_t)
        at -= n_pct
        if at < n_soft:
            return col(s_per_s[:, at], both_s)
        at -= n_soft
        if at < len(SOFTNET):
            return col(n_per_s[:, at], both_n)
        if name == "backlog":
            if type(softnet) is CpuTable:
                return list(map(dict(zip(softnet.cpus, softnet.column("backlog"))).get, cpus))
            return [None if r is None else r.backlog for r in map(softnet.get, cpus)]
        return reset.tolist()

    keys = list(cpus)
    cols = [base(name) for name in names]
    if judged:
        for i, one in judged.items():
            if one is not None:
                for c, name in zip(cols, names):
                    c[i] = getattr(one, name)
        left_out = {i for i, one in judged.items() if one is None}
        if left_out:
            keep = [i not in left_out for i in range(len(keys))]
            keys = list(itertools.compress(keys, keep))
            cols = [list(itertools.compress(c, keep)) for c in cols]
    return keys, cols


def rate_columns(rates: Mapping[K, Any], *names: str) -> tuple[list[K], list[list[Any]]]:
    """The keys of `rates` and, for each of `names`, that field of each value in the same
    order: a `RatesTable`'s own `columns` (without making its objects), else read off the
    dict (a recording's rates, a small host's per-CPU path)."""
    if type(rates) is RatesTable:
        return rates.columns(*names)
    return _dict_columns(rates, names)


def _dict_columns(rates: Mapping[K, Any], names: tuple[str, ...]) -> tuple[list[K], list[list[Any]]]:
    """`columns` read off a made mapping: its keys, and each named field of its values."""
    values = list(rates.values())
    return list(rates), [[getattr(v, name) for v in values] for name in names]


def _counter(what: str, x: int, y: int, elapsed: float,
             problems: list[Problem]) -> tuple[float | None, bool]:
    """Rate of a per-CPU 32-bit counter; a value outside 32 bits or a step backwards that
    is no wrap is told in `problems` (these counters are never reset while the CPU is
    online, so the step is corruption or a CPU that went off and on between the reads)."""
    try:
        r, reset = _per_s(x, y, elapsed, U32)
    except _Out:
        problems.append(Problem(what, f"{what}: count {max(x, y)} is outside 32 bits "
                                      "(corrupt); no rate"))
        return None, False
    if reset:
        problems.append(Problem(what, f"{what} went backwards ({x} -> {y}) without a wrap: "
                                      "shown as counting from 0 (a CPU offlined and back, or "
                                      "a corrupt read)"))
    return r, reset


# USER_HZ is 100 on every architecture Linux exports to user space; a CPU cannot spend
# more ticks than the wall clock gives it. Slack for the reads of /proc/stat and the
# monotonic clock not being the same instant: a snapshot is stamped before its IRQ
# counts are read and /proc/stat after them, and on a loaded host (or at 1,024 CPUs) two
# snapshots' gaps between stamp and read differ by tens of ms, which at -i 0.1 is more
# than the relative slack (seen: 12 ticks "in 0.07 s" under load).
_USER_HZ = 100
_TICK_SLACK = 1.25
_READ_SKEW_S = 0.1


def _time_split(a: CpuTimes, b: CpuTimes, elapsed: float = 0.0,
                problems: list[Problem] | None = None) -> tuple[dict[str, float], bool]:
    """Percent of elapsed CPU ticks per state; a backwards total means the CPU was reset.
    Every field of the total is checked (nice included), so the shares never pass 100."""
    va, vb = _ALL_TIMES(a), _ALL_TIMES(b)
    if not (min(va) >= 0 and min(vb) >= 0 and max(va) < U64 and max(vb) < U64):
        if problems is not None:
            problems.append(Problem("/proc/stat", f"/proc/stat cpu{b.cpu}: a time is outside "
                                                  "64 bits (corrupt); no CPU split"))
        return dict.fromkeys(_PCT_NAMES, 0.0), False
    total = b.total - a.total
    if total <= 0 or any(map(operator.lt, vb, va)):
        return dict.fromkeys(_PCT_NAMES, 0.0), total < 0
    if problems is not None and elapsed > 0 and total > _USER_HZ * (elapsed * _TICK_SLACK + _READ_SKEW_S) + 2:
        problems.append(Problem("/proc/stat", (
            f"/proc/stat is inconsistent: cpu{b.cpu} counted {total} ticks in {elapsed:.2f} s "
            f"(more than 100% of one CPU at USER_HZ={_USER_HZ}); its split is still shown "
            "as shares of those ticks")))
    return {name: 100.0 * (y - x) / total for name, x, y in zip(_PCT_NAMES, _TIMES(a), _TIMES(b))}, False


_TIME_FIELDS = ("user", "system", "idle", "iowait", "irq", "softirq", "steal")
_TIMES = operator.attrgetter(*_TIME_FIELDS)
_ALL_TIMES = operator.attrgetter("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_PCT_NAMES = tuple(f"{f}_pct" for f in _TIME_FIELDS)


def irq_rates(prev: Snapshot, cur: Snapshot, elapsed: float,
              problems: list[Problem] | None = None) -> Mapping[int, IrqRates]:
    """Rates of the IRQs whose counts were parsed in both snapshots."""
    if problems is None:
        problems = []
    out: dict[int, IrqRates] = {}
    pcpus, ccpus = prev.interrupts.cpus, cur.interrupts.cpus
    known = frozenset(ccpus) if pcpus == ccpus else None
    moved = _matrix_moved(prev, cur, ccpus, elapsed) if known is not None else None
    if moved is not None and not moved[3]:  # every count forwards: nothing to judge here
        gone = tuple(prev.interrupts.irqs.keys() - cur.interrupts.irqs.keys())
        return RatesTable(_build_irq_rates, cur.interrupts, ccpus, known, *moved[:3], gone,
                          columns=_irq_rate_columns)
    done = _matrix_rates(*moved, ccpus, known) if moved is not None and known is not None else {}
    for irq, b in cur.interrupts.irqs.items():
        got = done.get(irq)
        if got is not None:
            out[irq] = got
            continue
        a = prev.interrupts.irqs.get(irq)
        if b.counts is None:
            continue
        if a is None or a.counts is None:
            out[irq] = IrqRates(irq, Presence.NEW if a is None else Presence.BOTH)
            continue
        if len(a.counts) != len(pcpus) or len(b.counts) != len(ccpus):
            problems.append(Problem("/proc/interrupts", f"IRQ {irq}: counts do not match the CPU "
                                                        "header (corrupt); no rate"))
            out[irq] = IrqRates(irq, Presence.BOTH)
            continue
        out[irq] = _one_irq(a, b, pcpus, ccpus, elapsed, problems, known)
    for irq in prev.interrupts.irqs.keys() - cur.interrupts.irqs.keys():
        out[irq] = IrqRates(irq, Presence.GONE)
    return out


def _build_irq_rates(table: InterruptTable, cpus: tuple[int, ...], known: frozenset[int], irqs: tuple[int, ...],
                     where: tuple[Any, Any, Any], per_s: Any, gone: tuple[int, ...]) -> dict[int, IrqRates]:
    """The IrqRates of `irq_rates`' `RatesTable`: the loop of `irq_rates` when every
    counted IRQ of the table is a row of its matrix and none went backwards."""
    done = _matrix_rates(irqs, where, per_s, frozenset(), cpus, known)
    out: dict[int, IrqRates] = {}
    for irq, b in table.irqs.items():
        got = done.get(irq)
        if got is not None:
            out[irq] = got
        else:
            assert b.counts is None  # every counted IRQ is a row of the matrix
    for irq in gone:
        out[irq] = IrqRates(irq, Presence.GONE)
    return out


def _irq_rate_columns(names: tuple[str, ...], table: InterruptTable, cpus: tuple[int, ...], known: frozenset[int],
                      irqs: tuple[int, ...], where: tuple[Any, Any, Any], per_s: Any,
                      gone: tuple[int, ...]) -> tuple[list[int], list[list[Any]]] | None:
    """`RatesTable.columns` of `_build_irq_rates`' table for the fields "irq", "presence"
    and "per_s", without making its IrqRates (None for another field: the dict is made).
    Each IRQ's per_s is the Python sum of its row's rates in column order, as
    `_matrix_rates` adds them, so the same floats. The live view's before/after digest
    reads the NICs' interrupts a second each tick: at 1,024 CPUs making 516 IrqRates,
    each with its per-CPU dict, for that was ~1.4 ms a tick."""
    if not set(names) <= {"irq", "presence", "per_s"}:
        return None
    rows = where[0].tolist()
    values = per_s.tolist()
    sums: dict[int, float] = {}
    at = 0
    for r, run in itertools.groupby(rows):  # row-major: each moved row's cells side by side
        k = len(list(run))
        sums[irqs[r]] = sum(values[at:at + k])
        at += k
    keys = [i for i, b in table.irqs.items() if b.counts is not None]  # each a row of the matrix
    found = list(map(sums.get, keys, itertools.repeat(0.0)))
    keys += gone
    cols: list[list[Any]] = []
    for name in names:
        if name == "irq":
            cols.append(list(keys))
        elif name == "presence":
            cols.append([Presence.BOTH] * (len(keys) - len(gone)) + [Presence.GONE] * len(gone))
        else:
            cols.append(found + [None] * len(gone))
    return keys, cols


class PerCpuRates(Mapping[int, float]):
    """An IRQ's rate on every online CPU, stored as the CPUs where it fired.

    A queue IRQ fires on one CPU or a few; on 1,024 CPUs a dict of every CPU's rate was
    1,024 floats per IRQ per tick, nearly all 0.0. This holds the non-zero rates and the
    CPU ids (shared by every IRQ of the tick), and reads as the full mapping: every
    online CPU is a key, 0.0 where the IRQ did not fire."""

    __slots__ = ("_cpus", "_known", "_fired")

    def __init__(self, cpus: tuple[int, ...], known: frozenset[int] | set[int], fired: dict[int, float]) -> None:
        self._cpus = cpus
        self._known = known
        self._fired = fired

    def __getitem__(self, cpu: int) -> float:
        got = self._fired.get(cpu)
        if got is not None:
            return got
        if cpu in self._known:
            return 0.0
        raise KeyError(cpu)

    def __contains__(self, cpu: object) -> bool:
        return cpu in self._known

    def __iter__(self) -> Iterator[int]:
        return iter(self._cpus)

    def __len__(self) -> int:
        return len(self._cpus)

    def fired(self) -> Mapping[int, float]:
        """Only the CPUs where the IRQ fired (rate > 0), cheaper than `.items()`."""
        return self._fired

    def __repr__(self) -> str:
        return f"PerCpuRates({dict(self.items())!r})"


def _matrix_moved(prev: Snapshot, cur: Snapshot, cpus: tuple[int, ...],
                  elapsed: float) -> tuple[tuple[int, ...], tuple[Any, Any, Any], Any, frozenset[int]] | None:
    """When both tables are one count matrix each, of the same IRQs and CPUs (the sysfs
    reader's, model/counts.py): (the matrix's IRQs, (rows, columns, steps) of the counts
    that moved, their steps per second, the rows with a count that went backwards); else
    None. One comparison of the two matrices and one subtraction of the counts that
    moved, instead of a walk of 1,024 counts per IRQ."""
    ma, mb = table_matrix(prev.interrupts), table_matrix(cur.interrupts)
    if ma is None or mb is None or not ma.same_layout(mb) or elapsed <= 0 or not cpus:
        return None
    np = numpy()  # loaded already: the reader made these matrices
    # the counts that moved, found on the uint32 matrices (a queue IRQ moves on a CPU or
    # a few of 1,024): only those are widened to int64 and subtracted
    # (flatnonzero: np.nonzero of a 2-D mask costs ten times more)
    va, vb = ma.values.ravel(), mb.values.ravel()
    moved = np.flatnonzero(vb != va)
    rows, cols = np.divmod(moved, mb.values.shape[1])
    d = vb[moved].astype(np.int64) - va[moved]
    back = frozenset(rows[d < 0].tolist())
    return mb.irqs, (rows, cols, d), d / elapsed, back


def _matrix_rates(irqs: tuple[int, ...], where: tuple[Any, Any, Any], per_s: Any, back: frozenset[int],
                  cpus: tuple[int, ...], known: frozenset[int]) -> dict[int, IrqRates]:
    """`_fast_irq` for every row of `_matrix_moved`'s matrix but those in `back` (a count
    that went backwards, for `_one_irq` to judge and explain). The figures are those of
    `_fast_irq`, computed in the same order."""
    rows, cols, _ = where
    fired: dict[int, dict[int, float]] = {}
    for r, c, v in zip(rows.tolist(), cols.tolist(), per_s.tolist()):
        got = fired.get(r)
        if got is None:
            got = fired[r] = {}
        got[cpus[c]] = v
    out: dict[int, IrqRates] = {}
    for r, irq in enumerate(irqs):
        if r in back:
            continue
        f = fired.get(r)
        if f is None:
            out[irq] = IrqRates(irq, Presence.BOTH, 0.0, PerCpuRates(cpus, known, {}), False)
        else:
            out[irq] = IrqRates(irq, Presence.BOTH, sum(f.values()), PerCpuRates(cpus, known, f), False)
    return out


def _fast_irq(a: Irq, b: Irq, cpus: tuple[int, ...], known: frozenset[int],
              elapsed: float) -> IrqRates | None:
    """The usual case with C-level calls (a max, a min, one subtraction per count): same
    CPUs, every count within 32 bits, none went backwards; None otherwise, for the
    field-by-field path to judge and explain."""
    ac, bc = a.counts, b.counts
    assert ac is not None and bc is not None
    try:
        if len(ac) != len(bc) or not bc or max(bc) >= U32:
            return None
        if ac is bc or ac == bc:
            if min(bc) < 0:
                return None
            return IrqRates(b.irq, Presence.BOTH, 0.0, PerCpuRates(cpus, known, {}), False)
        if min(ac) < 0:
            return None
        # every count lies in [min(ac), max(bc)] once none went backwards: within 32 bits
        diffs = list(map(operator.sub, bc, ac))
    except TypeError:  # not numbers at all (a damaged recording)
        return None
    moved = list(itertools.compress(diffs, diffs))
    if min(moved) < 0:
        return None  # a wrap or a reset: judged per CPU
    vals = list(map(operator.truediv, moved, itertools.repeat(elapsed, len(moved))))
    return IrqRates(b.irq, Presence.BOTH, sum(vals),
                    PerCpuRates(cpus, known, dict(zip(itertools.compress(cpus, diffs), vals))), False)


def _one_irq(a: Irq, b: Irq, pcpus: tuple[int, ...], ccpus: tuple[int, ...],
             elapsed: float, problems: list[Problem], known: frozenset[int] | None = None) -> IrqRates:
    assert a.counts is not None and b.counts is not None
    if known is not None and pcpus == ccpus:
        fast = _fast_irq(a, b, ccpus, known, elapsed)
        if fast is not None:
            return fast
    pairs: Iterable[tuple[int, int, int]]  # (cpu, count before, count now)
    if pcpus == ccpus:  # the usual case: the counts side by side
        pairs = zip(ccpus, a.counts, b.counts)
    else:  # a CPU that came online has no rate yet: its count since then is unknown
        before = dict(zip(pcpus, a.counts))
        pairs = ((cpu, before[cpu], cnt) for cpu, cnt in zip(ccpus, b.counts) if cpu in before)
    per_cpu: dict[int, float] = {}
    total = 0.0
    reset = False
    for cpu, old, cnt in pairs:
        if 0 <= old <= cnt < U32:  # inline: only a backwards count needs `delta`'s judgement
            r = (cnt - old) / elapsed
        else:
            try:
                r, was_reset = _per_s(old, cnt, elapsed, U32)
            except _Out:
                problems.append(Problem("/proc/interrupts", f"IRQ {b.irq} on CPU {cpu}: count "
                                                            "outside 32 bits (corrupt); no rate"))
                continue
            if was_reset and a.name == b.name:
                problems.append(Problem("/proc/interrupts", (
                    f"IRQ {b.irq} ({b.name}) on CPU {cpu} went backwards ({old} -> {cnt}) "
                    "without a wrap or a new IRQ: shown as counting from 0 (corrupt read?)")))
            reset |= was_reset
        per_cpu[cpu] = r
        total += r
    cpus = tuple(per_cpu)
    return IrqRates(b.irq, Presence.BOTH, total,
                    PerCpuRates(cpus, frozenset(cpus), {c: r for c, r in per_cpu.items() if r}), reset)


_LINK_FIELDS = (
    "rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
    "rx_errors", "tx_errors", "rx_dropped", "tx_dropped",
)


def link_rates(prev: Snapshot, cur: Snapshot, elapsed: float) -> dict[str, LinkRates]:
    out: dict[str, LinkRates] = {}
    for name, b in cur.links.items():
        a = prev.links.get(name)
        if a is None or a.ifindex != b.ifindex:  # new, or deleted and re-created
            out[name] = LinkRates(name, Presence.NEW)
            continue
        out[name] = _one_link(a, b, prev, cur, elapsed)
    for name in prev.links.keys() - cur.links.keys():
        out[name] = LinkRates(name, Presence.GONE)
    return out


def _one_link(a: LinkStats, b: LinkStats, prev: Snapshot, cur: Snapshot,
              elapsed: float) -> LinkRates:
    fields: dict[str, float | None] = {}
    reset = False
    for f in _LINK_FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if x is None or y is None:  # not in the capture: unknown, not 0
            fields[f"{f}_per_s"] = None
            continue
        try:
            fields[f"{f}_per_s"], r = _per_s(x, y, elapsed, U64)
        except _Out:
            fields[f"{f}_per_s"], r = None, False
        reset |= r
    qa, qb = prev.queue_stats.get(b.name), cur.queue_stats.get(b.name)
    queues: tuple[QueueRates, ...] = ()
    if qa and qb:
        before = {(q.kind, q.index): q for q in qa.queues}
        queues = tuple(_one_queue(before.get((q.kind, q.index)), q, elapsed) for q in qb.queues)
    return LinkRates(b.name, Presence.BOTH, queues=queues, reset=reset, **fields)


def _one_queue(a: QueueCounters | None, b: QueueCounters, elapsed: float) -> QueueRates:
    if a is None:
        return QueueRates(b.kind, b.index)

    def r(x: int | None, y: int | None) -> float | None:
        return None if x is None or y is None else _maybe_per_s(x, y, elapsed, U64)

    return QueueRates(b.kind, b.index, r(a.packets, b.packets), r(a.bytes, b.bytes))


def qdisc_rates(prev: Snapshot, cur: Snapshot, elapsed: float) -> dict[str, tuple[QdiscRates, ...]]:
    out: dict[str, tuple[QdiscRates, ...]] = {}
    for ifname, qds in cur.qdiscs.items():
        before = {(q.handle, q.parent, q.kind): q for q in prev.qdiscs.get(ifname, ())}
        rows = []
        for q in qds:
            a = before.get((q.handle, q.parent, q.kind))
            if a is None:  # replaced qdisc: counters start over, no rate this interval
                rows.append(QdiscRates(ifname, q.handle, q.parent, q.kind))
                continue
            rows.append(QdiscRates(
                ifname, q.handle, q.parent, q.kind,
                bytes_per_s=_maybe_per_s(a.bytes, q.bytes, elapsed, U64),
                packets_per_s=_maybe_per_s(a.packets, q.packets, elapsed, U32),
                drops_per_s=_maybe_per_s(a.drops, q.drops, elapsed, U32),
                overlimits_per_s=_maybe_per_s(a.overlimits, q.overlimits, elapsed, U32),
                requeues_per_s=_maybe_per_s(a.requeues, q.requeues, elapsed, U32),
            ))
        out[ifname] = tuple(rows)
    return out


def compute_rates(prev: Snapshot, cur: Snapshot) -> Rates:
    """All rates between two snapshots of the same host, from their real elapsed time."""
    elapsed = cur.t_mono - prev.t_mono
    if not (elapsed > 0 and math.isfinite(elapsed)):
        raise ValueError(f"snapshots are not in time order (elapsed {elapsed:.6f} s)")
    problems: list[Problem] = []
    return Rates(
        t_wall=cur.t_wall,
        elapsed_s=elapsed,
        cpus=cpu_rates(prev, cur, elapsed, problems),
        irqs=irq_rates(prev, cur, elapsed, problems),
        links=link_rates(prev, cur, elapsed),
        qdiscs=qdisc_rates(prev, cur, elapsed),
        sampler_cpu_pct=100.0 * cur.read_cpu_s / elapsed,
        problems=_first(problems),
    )


_MAX_PROBLEMS = 20  # a corrupt 256-CPU file would otherwise give hundreds of lines


def _first(problems: list[Problem]) -> tuple[Problem, ...]:
    seen = list(dict.fromkeys(problems))
    if len(seen) <= _MAX_PROBLEMS:
        return tuple(seen)
    more = len(seen) - _MAX_PROBLEMS + 1
    return (*seen[:_MAX_PROBLEMS - 1], Problem("rates", f"... and {more} more problems of the same kind"))
