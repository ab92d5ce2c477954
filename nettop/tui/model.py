"""What the screen shows, as plain rows computed from a timeline point.

Everything here is a pure function of `Point`s (no Textual import), so the tables only
have to compare rows and update the cells that changed, and tests can check the
figures without a terminal. Queue rows reuse the join that `nettop snapshot --json`
does (queue map + IRQ affinity + RPS/XPS + per-queue rates), so both always agree.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Callable, Collection, Iterable, Iterator, Sequence

from nettop.model.rates import Presence, Rates, rate_columns
from nettop.model.snapshot import QueueIrqs, Snapshot, setting_age
from nettop.output.device_doc import QueueJoin, QueueJoiner, qdisc_doc, rounded
from nettop.model.history import ChartHistory
from nettop.model.rows import build
from nettop.model.timeline import Event, Point, Timeline

# Interfaces that are shown unless the operator picks otherwise: everything but loopback.
HIDDEN_BY_DEFAULT = frozenset({"lo"})


@dataclass(frozen=True, slots=True)
class QueueRow:
    key: str  # "eth0/combined/0": stable across ticks, the DataTable row key
    ifname: str
    kind: str
    index: int
    irqs: tuple[int, ...]
    affinity: tuple[int, ...] | None
    effective: tuple[int, ...] | None
    irq_per_s: float | None
    rx_pps: float | None
    tx_pps: float | None
    rps: str | None
    xps: str | None
    managed: bool  # kernel-managed IRQ: its affinity cannot be moved
    settings_age: float = 0.0  # seconds since its oldest setting was read; 0: this tick

    @property
    def label(self) -> str:
        return f"{self.ifname} {self.kind}-{self.index}"

    @property
    def shown_label(self) -> str:
        """The label, with how old its settings are when they are not from this tick."""
        return self.label + stale_mark(self.settings_age)

    @property
    def activity(self) -> float | None:
        """What the sparkline draws: IRQs/s where the queue has IRQs, else packets/s."""
        if self.irqs:
            return self.irq_per_s
        if self.rx_pps is None and self.tx_pps is None:
            return None
        return (self.rx_pps or 0.0) + (self.tx_pps or 0.0)


@dataclass(frozen=True, slots=True)
class CpuRow:
    cpu: int
    softirq_pct: float | None
    irq_pct: float | None
    net_rx_per_s: float | None
    net_tx_per_s: float | None
    dropped_per_s: float | None
    squeeze_per_s: float | None
    rps_per_s: float | None
    offline: bool = False  # listed by a node or /proc/softirqs, offline by sysfs: no figures


@dataclass(frozen=True, slots=True)
class QdiscRow:
    key: str
    ifname: str
    kind: str
    handle: str
    parent: str
    backlog_bytes: int
    backlog_packets: int
    drops: int
    requeues: int
    drops_per_s: float | None


@dataclass(frozen=True, slots=True)
class BqlRow:
    key: str
    ifname: str
    queue: int
    limit: int
    inflight: int
    limit_max: int
    age: float = 0.0  # seconds since it was read; 0: this tick

    @property
    def shown_label(self) -> str:
        """"eth0 tx-7", with how old its state is when it is not from this tick."""
        return f"{self.ifname} tx-{self.queue}{stale_mark(self.age)}"


def stale_mark(age: float) -> str:
    """" ~7s" after a setting read 7 s before the sample shown (off screen settings are
    read in rotation); "" for one read in this sample."""
    if age <= 0.0:
        return ""
    return f" ~{age:.0f}s" if age >= 1.0 else f" ~{age:.1f}s"


LABEL_CAP = 24  # a label column is never wider (tables.label_width)
_IFNAME, _JOINER = operator.attrgetter("ifname"), operator.attrgetter("_joiner")


def mark_room(ages: Iterable[float]) -> int:
    """The most characters `stale_mark` adds for a setting of any of `ages` (seconds, or
    those rounded to the millisecond): 0 when all are from this tick. The mark grows
    with the age (" ~7s", " ~24s", ...), but one below a second has six (" ~0.4s")."""
    ordered = sorted(ages)  # at C speed: ~1,500 settings of a 4 x 128-queue host
    if not ordered or ordered[-1] <= 0.0:
        return 0
    room = len(stale_mark(ordered[-1] + 0.001))  # rounding to 3 decimals adds at most 0.0005
    first = bisect_right(ordered, 0.0)  # the youngest not from this tick
    return max(room, 6) if ordered[first] < 1.0 else room


def _grown_width(runs: Iterable[tuple[int, int, Sequence[Any], Callable[[Any], int]]], floor: int,
                 width: int) -> int:
    """What `label_width` of every row's `shown_label` gives a label column once `widen`ed
    from `width` (the column only grows), measuring only the rows that could be wider
    than it. `runs`: an interface's rows at a time, as (the most characters its settings'
    ages can add, `mark_room`; its longest label without them; its rows; a row's label
    length without them)."""
    best = floor
    for room, longest, rows, bare in runs:
        if min(longest + room, LABEL_CAP) <= max(width, best):
            continue  # no label of it can widen the column
        for r in rows:
            if min(bare(r) + room, LABEL_CAP) > max(width, best):
                best = max(best, min(len(r.shown_label), LABEL_CAP))
    return best


def _bql_bare(r: BqlRow) -> int:
    return len(r.ifname) + 4 + len(str(r.queue))  # "eth0 tx-7"


def bql_label_width(rows: Sequence[BqlRow], floor: int, width: int) -> int:
    """`queue_label_width` of the BQL table's labels ("eth0 tx-7 ~12s")."""
    def runs() -> Iterator[tuple[int, int, list[BqlRow], Callable[[Any], int]]]:
        for _, run in groupby(rows, key=_IFNAME):
            group = list(run)
            yield mark_room([r.age for r in group]), max(map(_bql_bare, group)), group, _bql_bare
    return _grown_width(runs(), floor, width)


def _queue_bare(r: QueueRef) -> int:
    return len(r.ifname) + 2 + len(r.kind) + len(str(r.index))  # "eth0 rx-7"


def queue_label_width(refs: Sequence[QueueRef], floor: int, width: int) -> int:
    """What `label_width` of every ref's `shown_label` gives the column once `widen`ed
    from `width` (the column only grows): each interface's queues whose label, with the
    longest mark their settings' ages allow (`mark_room`), could be wider than the
    column now are measured, and the rest are not (`_grown_width`). A 4 x 128-queue
    host has 512 queue rows; making every label and its settings' age each tick (~3 ms)
    only to find the column as wide as it was is what this spares. `refs` as
    `queue_refs` gives them: an interface's queues side by side."""
    def runs() -> Iterator[tuple[int, int, list[QueueRef], Callable[[Any], int]]]:
        for joiner, run in groupby(refs, key=_JOINER):
            group = list(run)
            now = joiner.now
            room = mark_room([now - t for t in joiner.read_ats(r._q for r in group)])
            longest = (len(group[0].ifname) + 2 + max(map(len, {r.kind for r in group}))
                       + len(str(max(r.index for r in group))))
            yield room, longest, group, _queue_bare
    return _grown_width(runs(), floor, width)


def shown_interfaces(snap: Snapshot, picked: frozenset[str] | None) -> list[str]:
    """The interfaces on screen: the operator's pick, else all but loopback."""
    if picked is not None:
        return [n for n in sorted(snap.links) if n in picked]
    return [n for n in sorted(snap.links) if n not in HIDDEN_BY_DEFAULT]


def _is_managed(aff: Any) -> bool:
    return bool(getattr(aff, "managed", False))


def queue_rows(point: Point, ifnames: Sequence[str]) -> list[QueueRow]:
    return [ref.row() for ref in queue_refs(point, ifnames)]


def _queue_row(name: str, j: QueueJoin) -> QueueRow:
    q = j.q
    aff, eff = j.union("affinity"), j.union("effective")
    rx, tx = j.side("rx"), j.side("tx")
    return QueueRow(
        key=f"{name}/{q.kind}/{q.index}",
        ifname=name,
        kind=q.kind,
        index=q.index,
        irqs=q.irqs,
        affinity=tuple(aff) if aff is not None else None,
        effective=tuple(eff) if eff is not None else None,
        irq_per_s=j.irq_per_s,
        rx_pps=rounded(rx[0].packets_per_s) if rx and rx[0] else None,
        tx_pps=rounded(tx[0].packets_per_s) if tx and tx[0] else None,
        rps=rx[1].rps_cpus if rx and rx[1] else None,
        xps=tx[1].xps_cpus if tx and tx[1] else None,
        managed=any(_is_managed(a) for a in j.aff),
        settings_age=j.settings_age_s or 0.0,
    )


class QueueRef:
    """One queue of the table before it is joined: what the sort and the column width
    need, each figure computed only when asked, and the whole `QueueRow` (`row()`) only
    for a row that is drawn. A 4 x 128-queue host sorts 512 of these a tick and joins
    the twenty on screen."""

    __slots__ = ("key", "ifname", "kind", "index", "irqs", "_q", "_joiner", "_row")

    def __init__(self, name: str, q: QueueIrqs, joiner: QueueJoiner) -> None:
        self.key = f"{name}/{q.kind}/{q.index}"
        self.ifname, self.kind, self.index, self.irqs = name, q.kind, q.index, q.irqs
        self._q, self._joiner = q, joiner
        self._row: QueueRow | None = None

    def row(self) -> QueueRow:
        if self._row is None:
            self._row = _queue_row(self.ifname, self._joiner.join(self._q))
        return self._row

    @property
    def shown_label(self) -> str:
        """`QueueRow.shown_label`, from the settings' age alone."""
        if self._row is not None:
            return self._row.shown_label
        return f"{self.ifname} {self.kind}-{self.index}" + stale_mark(self._joiner.settings_age(self._q) or 0.0)

    @property
    def irq_per_s(self) -> float | None:
        return self._row.irq_per_s if self._row is not None else self._joiner.irq_per_s(self._q)

    def _pps(self, kind: str) -> float | None:
        if self.kind != kind and self.kind != "combined":
            return None
        r = self._joiner.qrates.get((kind, self.index))
        return rounded(r.packets_per_s) if r else None

    @property
    def rx_pps(self) -> float | None:
        return self._pps("rx")

    @property
    def tx_pps(self) -> float | None:
        return self._pps("tx")

    @property
    def effective(self) -> tuple[int, ...] | None:
        if self._row is not None:
            return self._row.effective
        eff = self._joiner.effective(self._q)
        return tuple(eff) if eff is not None else None


def queue_refs(point: Point, ifnames: Sequence[str]) -> list[QueueRef]:
    """The queues of `ifnames` in the table's natural order, not yet joined (`QueueRef`)."""
    snap, rates = point.snapshot, point.rates
    if rates is None:
        return []
    refs: list[QueueRef] = []
    for name in ifnames:
        if name not in snap.links:
            continue
        qmap = snap.queue_maps.get(name)
        joiner = QueueJoiner(name, snap, rates, snap.devices.get(name))
        refs.extend(QueueRef(name, q, joiner) for q in joiner.queues(qmap.queues if qmap else ()))
    return refs


def cpu_rows(point: Point) -> list[CpuRow]:
    if point.rates is None:
        return [CpuRow(c, None, None, None, None, None, None, None) for c in point.snapshot.online_cpus]
    # the fields as columns: at 1,024 CPUs a tick's CpuRates are never made (RatesTable.columns)
    keys, (cpu, presence, *figures) = rate_columns(
        point.rates.cpus, "cpu", "presence", "softirq_pct", "irq_pct", "net_rx_per_s", "net_tx_per_s",
        "softnet_dropped_per_s", "time_squeeze_per_s", "received_rps_per_s")
    gone, offline = Presence.GONE, Presence.OFFLINE  # members compared, not their values: 1,024 rows a tick
    # made column by column (model/rows.build): 1,024 frozen rows a tick, ~2 us each one by one
    rows = build(CpuRow, cpu, *figures, [p is offline for p in presence])
    if any(a > b for a, b in zip(keys, keys[1:])):  # in CPU order, as the dict almost always is
        order = sorted(range(len(keys)), key=keys.__getitem__)
        rows, presence = [rows[i] for i in order], [presence[i] for i in order]
    return [row for row, p in zip(rows, presence) if p is not gone]


def qdisc_rows(point: Point, ifnames: Sequence[str]) -> list[QdiscRow]:
    snap, rates = point.snapshot, point.rates
    rows: list[QdiscRow] = []
    for name in ifnames:
        doc = qdisc_doc(snap.qdiscs.get(name, ()), rates.qdiscs.get(name, ()) if rates else ())
        if doc is None:
            continue
        tops = [doc, *doc["children"]] + ([doc["ingress"]] if "ingress" in doc else [])
        for q in tops:
            rows.append(QdiscRow(
                key=f"{name}/{q['handle']}/{q['parent']}", ifname=name, kind=q["kind"],
                handle=q["handle"], parent=q["parent"], backlog_bytes=q["backlog_bytes"],
                backlog_packets=q["backlog_packets"], drops=q["drops"], requeues=q["requeues"],
                drops_per_s=q["drops_per_s"],
            ))
    return rows


def bql_rows(snap: Snapshot, ifnames: Sequence[str]) -> list[BqlRow]:
    rows: list[BqlRow] = []
    for name in ifnames:
        dev = snap.devices.get(name)
        for b in (dev.bql if dev else ()):
            rows.append(BqlRow(f"{name}/tx-{b.queue}", name, b.queue, b.limit, b.inflight, b.limit_max,
                               setting_age(snap.t_mono, b.read_at)))
    return rows


def busiest(rates: Rates | None, ifnames: Sequence[str], limit: int, by_load: bool = False) -> list[str]:
    """The `limit` interfaces moving the most bytes now: in name order (stable chart
    legends), or busiest first with `by_load`."""
    if len(ifnames) <= limit and not by_load:
        return list(ifnames)

    def load(name: str) -> float:
        lr = rates.links.get(name) if rates else None
        return ((lr.rx_bytes_per_s or 0.0) + (lr.tx_bytes_per_s or 0.0)) if lr else 0.0

    top = sorted(ifnames, key=lambda n: (-load(n), n))[:limit]
    return top if by_load else sorted(top)


@dataclass(frozen=True, slots=True)
class Series:
    """One interface's throughput over the chart window; x is seconds before the newest point."""

    ifname: str
    xs: tuple[float, ...]
    rx_bits: tuple[float, ...]
    tx_bits: tuple[float, ...]


def throughput(points: Sequence[Point], ifnames: Iterable[str], window_s: float) -> list[Series]:
    if not points:
        return []
    now = points[-1].snapshot.t_mono
    recent = [p for p in points if p.rates is not None and now - p.snapshot.t_mono <= window_s]
    out = []
    for name in ifnames:
        xs: list[float] = []
        rx: list[float] = []
        tx: list[float] = []
        for p in recent:
            lr = p.rates.links.get(name) if p.rates else None
            if lr is None or lr.rx_bytes_per_s is None or lr.tx_bytes_per_s is None:
                continue
            xs.append(round(p.snapshot.t_mono - now, 3))
            rx.append(8 * lr.rx_bytes_per_s)
            tx.append(8 * lr.tx_bytes_per_s)
        out.append(Series(name, tuple(xs), tuple(rx), tuple(tx)))
    return out


def throughput_of(timeline: Timeline, ifnames: Iterable[str], window_s: float) -> list[Series]:
    """`throughput` from the timeline's compact chart history (the same figures, without
    keeping whole points for the whole window)."""
    names = list(ifnames)

    def read(h: ChartHistory) -> list[Series]:
        if not len(h):
            return []
        out = []
        for name in names:
            xs, rx, tx = h.link_series(name, window_s)
            out.append(Series(name, tuple(xs), tuple(rx), tuple(tx)))
        return out
    result: list[Series] = timeline.chart(read)
    return result


def latency_series_of(timeline: Timeline, window_s: float) -> dict[str, tuple[list[float], list[float]]]:
    """`latency_series` from the timeline's compact chart history."""
    result: dict[str, tuple[list[float], list[float]]] = timeline.chart(lambda h: h.latency_series(window_s))
    return result


def event_offsets(events: Iterable[Event], newest: Snapshot, window_s: float) -> list[float]:
    """Where each event sits on the chart's x axis (seconds before the newest point)."""
    out = []
    for e in events:
        x = e.t_wall - newest.t_wall
        if -window_s <= x <= 0:
            out.append(round(x, 3))
    return out


def latency_ms(stats: Any) -> float | None:
    """The RTT a chart plots for one interval: a LatencyStats' average, or a bare number."""
    if isinstance(stats, (int, float)):
        return float(stats)
    return getattr(stats, "rtt_avg_ms", None)


def latency_series(points: Sequence[Point], window_s: float) -> dict[str, tuple[list[float], list[float]]]:
    """Average round-trip time per target over the window (from `Snapshot.latency`);
    empty when no latency probe runs."""
    if not points:
        return {}
    now = points[-1].snapshot.t_mono
    out: dict[str, tuple[list[float], list[float]]] = {}
    for p in points:
        if now - p.snapshot.t_mono > window_s:
            continue
        lat = getattr(p.snapshot, "latency", None)
        if not lat:
            continue
        for target, stats in lat.items():
            ms = latency_ms(stats)
            xs, ys = out.setdefault(str(target), ([], []))
            if ms is not None:
                xs.append(round(p.snapshot.t_mono - now, 3))
                ys.append(float(ms))
    return out


@dataclass(frozen=True, slots=True)
class LatencyRow:
    key: str
    target: str
    sent: int
    received: int
    loss_pct: float | None
    avg_ms: float | None
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    error: str | None


def latency_rows(snap: Snapshot) -> list[LatencyRow]:
    lat = getattr(snap, "latency", None) or {}
    rows = []
    for target, s in sorted(lat.items()):
        rows.append(LatencyRow(
            key=str(target), target=str(target), sent=getattr(s, "sent", 0), received=getattr(s, "received", 0),
            loss_pct=getattr(s, "loss_pct", None), avg_ms=latency_ms(s), p50_ms=getattr(s, "rtt_p50_ms", None),
            p99_ms=getattr(s, "rtt_p99_ms", None), max_ms=getattr(s, "rtt_max_ms", None),
            error=getattr(s, "error", None),
        ))
    return rows


def root_notice(snap: Snapshot, is_root: bool) -> str | None:
    """One line saying which parts are missing for lack of privilege, or None."""
    denied = [p.source for p in snap.problems if "permission denied" in p.message.lower()]
    if is_root and not denied:
        return None
    parts = sorted(set(denied))
    shown = ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")
    head = "not root: " if not is_root else ""
    if parts:
        return f"{head}these need root and are not shown: {shown}"
    return (f"{head}read-only view; IRQ affinity changes, ethtool coalesce/rings and "
            "some driver counters need root")


class QueueTrends:
    """The activity of any queue over the last points (what its sparkline draws), looked
    up on demand: each interface's per-queue rates are indexed once, for the first row
    that asks, so a tick computes the trends of the rows drawn and not of every queue."""

    def __init__(self, points: Sequence[Point], width: int) -> None:
        self._recent = [p.rates for p in points[-width:] if p.rates is not None]
        self._by_if: dict[str, list[dict[tuple[str, int], Any]]] = {}

    def _queues(self, name: str) -> list[dict[tuple[str, int], Any]]:
        out = self._by_if.get(name)
        if out is None:
            out = self._by_if[name] = []
            for rates in self._recent:
                lr = rates.links.get(name)
                out.append({(q.kind, q.index): q for q in (lr.queues if lr else ())})
        return out

    def of(self, row: QueueRow | QueueRef) -> list[float | None]:
        """The row's activity, oldest first: IRQs/s where it has IRQs, else packets/s."""
        out: list[float | None] = []
        if row.irqs:
            for rates in self._recent:
                irqs = rates.irqs
                vals = [irqs[i].per_s for i in row.irqs if i in irqs]
                known = [v for v in vals if v is not None]
                out.append(sum(known) if known else None)
            return out
        kinds = ("rx", "tx") if row.kind == "combined" else (row.kind,)
        for qr in self._queues(row.ifname):
            pk = [qr[(k, row.index)].packets_per_s for k in kinds if (k, row.index) in qr]
            known = [v for v in pk if v is not None]
            out.append(sum(known) if known else None)
        return out


def queue_activity_history(points: Sequence[Point], rows: Sequence[QueueRow | QueueRef],
                           width: int) -> dict[str, list[float | None]]:
    """The last `width` activity values of each queue row, oldest first, for sparklines."""
    trends = QueueTrends(points, width)
    return {r.key: trends.of(r) for r in rows}


# --- the summary: every figure group on one small screen ---------------------------------

IDLE_WINDOW = 10  # points without traffic before an interface folds into the idle line


@dataclass(frozen=True, slots=True)
class IfaceSummary:
    """One interface on the summary: its throughput, drops and hottest queue."""

    name: str
    first: bool  # carries the default route (or is eth0 when no route is known)
    state: str  # operstate
    rx_bits: float | None
    tx_bits: float | None
    packets_per_s: float | None  # rx + tx
    drops_per_s: float | None  # rx + tx dropped
    hot_queue: str | None  # "rx-3" (or "q12" for combined-12): most IRQs/s (else packets/s)
    hot_rate: float | None
    hot_unit: str  # "irq/s" or "pkt/s"
    hot_cpus: str | None  # the CPUs that serve it: effective IRQ affinity, else RPS/XPS
    trend: tuple[float | None, ...]  # rx + tx bit/s of the last points, oldest first
    session: bool = False  # carries this SSH session (a change on it is applied on trial)


@dataclass(frozen=True, slots=True)
class QdiscSummary:
    """One interface's root qdisc (and ingress) on one line: backlog and drops."""

    ifname: str
    kind: str  # "mq+4 pfifo_fast"
    backlog_bytes: int
    backlog_packets: int
    drops: int
    drops_per_s: float | None
    requeues: int


def first_interfaces(snap: Snapshot, route_ifindexes: Sequence[int]) -> list[str]:
    """The interfaces shown first: those carrying a default route (by ifindex, lowest
    metric first), else eth0 when the route is unknown (a replay, a captured tree)."""
    by_index = {link.ifindex: name for name, link in snap.links.items()}
    first = [by_index[i] for i in route_ifindexes if i in by_index]
    if not first and "eth0" in snap.links:
        first = ["eth0"]
    return first


def _load(rates: Rates | None, name: str) -> float:
    lr = rates.links.get(name) if rates else None
    return ((lr.rx_bytes_per_s or 0.0) + (lr.tx_bytes_per_s or 0.0)) if lr else 0.0


def summary_order(rates: Rates | None, names: Sequence[str], first: Sequence[str]) -> list[str]:
    """The default-route interfaces first, then the busiest."""
    head = [n for n in first if n in names]
    rest = sorted((n for n in names if n not in head), key=lambda n: (-_load(rates, n), n))
    return head + rest


def idle_interfaces(points: Sequence[Point], names: Sequence[str], keep: Sequence[str] = (),
                    window: int = IDLE_WINDOW) -> list[str]:
    """Interfaces that moved no byte over the last `window` points and have no queue IRQs
    (an idle ifb, a down link): the summary folds them into one line. The window keeps
    an interface with a packet now and then from jumping in and out."""
    if not points:
        return []
    snap = points[-1].snapshot
    recent = [p.rates for p in points[-window:] if p.rates is not None]
    out = []
    for name in names:
        if name in keep:
            continue
        qmap = snap.queue_maps.get(name)
        if qmap is not None and any(q.irqs for q in qmap.queues):
            continue
        if any(_load(r, name) > 0 for r in recent):
            continue
        out.append(name)
    return out


def _queue_cpus(row: QueueRow) -> str | None:
    from nettop.collectors.cpus import format_cpu_list, parse_cpu_mask

    if row.irqs:
        cpus = row.effective or row.affinity
        return format_cpu_list(cpus) if cpus else None
    mask = row.rps if row.kind == "rx" else row.xps if row.kind == "tx" else (row.rps or row.xps)
    try:
        cpus = parse_cpu_mask(mask) if mask else ()
    except ValueError:
        return None
    return format_cpu_list(cpus) if cpus else None


def iface_summaries(points: Sequence[Point], names: Sequence[str], first: Sequence[str],
                    trend_width: int = 8, session: Collection[str] = ()) -> list[IfaceSummary]:
    """One summary per interface of `names` (in that order), from the newest point."""
    point = points[-1]
    snap, rates = point.snapshot, point.rates
    hot: dict[str, QueueRow] = {}
    for q in queue_rows(point, names):
        if q.activity is not None and (q.ifname not in hot or q.activity > (hot[q.ifname].activity or 0.0)):
            hot[q.ifname] = q
    recent = [p.rates for p in points[-trend_width:] if p.rates is not None]
    out = []
    for name in names:
        link = snap.links.get(name)
        lr = rates.links.get(name) if rates else None
        pps = drops = None
        if lr is not None and lr.rx_packets_per_s is not None and lr.tx_packets_per_s is not None:
            pps = lr.rx_packets_per_s + lr.tx_packets_per_s
        if lr is not None and lr.rx_dropped_per_s is not None and lr.tx_dropped_per_s is not None:
            drops = lr.rx_dropped_per_s + lr.tx_dropped_per_s
        hq = hot.get(name)
        trend = []
        for r in recent:
            tl = r.links.get(name)
            rx, tx = (tl.rx_bytes_per_s, tl.tx_bytes_per_s) if tl is not None else (None, None)
            trend.append(8 * (rx + tx) if rx is not None and tx is not None else None)
        out.append(IfaceSummary(
            name=name, first=name in first, session=name in session, state=link.operstate if link else "gone",
            rx_bits=8 * lr.rx_bytes_per_s if lr and lr.rx_bytes_per_s is not None else None,
            tx_bits=8 * lr.tx_bytes_per_s if lr and lr.tx_bytes_per_s is not None else None,
            packets_per_s=pps, drops_per_s=drops,
            hot_queue=(f"q{hq.index}" if hq.kind == "combined" else f"{hq.kind}-{hq.index}") if hq else None, hot_rate=hq.activity if hq else None,
            hot_unit="irq/s" if hq and hq.irqs else "pkt/s", hot_cpus=_queue_cpus(hq) if hq else None,
            trend=tuple(trend),
        ))
    return out


def heat_level(row: CpuRow) -> int:
    """0 (quiet) to 3 (hot: dropping, squeezed hard or half the time in softirq)."""
    if row.dropped_per_s:
        return 3
    s = row.softirq_pct or 0.0
    if s >= 50 or (row.squeeze_per_s or 0) >= 100:
        return 3
    if s >= 20:
        return 2
    if s >= 5:
        return 1
    return 0


def cpu_strip(rows: Sequence[CpuRow], cells: int) -> tuple[list[tuple[float | None, int]], int]:
    """The CPUs as at most `cells` cells of (softirq %, heat level), and how many CPUs each
    cell stands for: one per CPU when they fit, else the hottest of each run of CPUs."""
    per = max(1, -(-len(rows) // max(1, cells)))
    out: list[tuple[float | None, int]] = []
    for i in range(0, len(rows), per):
        group = rows[i:i + per]
        known = [r.softirq_pct for r in group if r.softirq_pct is not None]
        out.append((max(known) if known else None, max(heat_level(r) for r in group)))
    return out, per


def top_cpus(rows: Sequence[CpuRow], n: int) -> list[CpuRow]:
    """The `n` CPUs spending the most time in softirq, those dropping packets first."""
    return sorted((r for r in rows if r.softirq_pct is not None),
                  key=lambda r: (not r.dropped_per_s, -(r.softirq_pct or 0.0), r.cpu))[:n]


def qdisc_summaries(point: Point, names: Sequence[str]) -> list[QdiscSummary]:
    """Each interface's root qdisc (backlog and drops include its children's) plus its
    ingress drops; interfaces with only noqueue have nothing to say and are left out."""
    rows_by_if: dict[str, list[QdiscRow]] = {}
    for r in qdisc_rows(point, names):
        rows_by_if.setdefault(r.ifname, []).append(r)
    out = []
    for name in names:
        rows = rows_by_if.get(name, [])
        root = next((r for r in rows if r.parent == "root"), None)
        if root is None or root.kind == "noqueue":
            continue
        children = [r for r in rows if r.parent not in ("root", "ffff:fff1") and r.kind != "ingress"]
        kinds = sorted({c.kind for c in children})
        kind = root.kind + (f"+{len(children)} {'/'.join(kinds)}" if children else "")
        ingress = [r for r in rows if r.kind in ("ingress", "clsact")]
        drops_s = [r.drops_per_s for r in [root, *ingress]]
        out.append(QdiscSummary(
            name, kind, root.backlog_bytes, root.backlog_packets, root.drops + sum(r.drops for r in ingress),
            None if any(d is None for d in drops_s) else sum(d for d in drops_s if d is not None),
            root.requeues))
    return out
