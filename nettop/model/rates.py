"""Rates: pure functions of two snapshots.

Nothing here reads the kernel or the clock. Elapsed time is the difference of the
snapshots' monotonic timestamps, never the nominal interval, so a late tick shows true
rates. Things that exist in only one of the two snapshots are marked (`Presence`)
instead of producing nonsense: a new interface has no rate yet, a vanished IRQ is
reported gone, a counter that was reset is flagged.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Mapping

from nettop.model.counters import U32, U64, Step, delta
from nettop.model.snapshot import CpuTimes, Irq, LinkStats, QueueCounters, Snapshot


class Presence(Enum):
    BOTH = "ok"
    NEW = "new"  # only in the later snapshot: no rate yet
    GONE = "gone"  # only in the earlier snapshot


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


def _per_s(prev: int, cur: int, elapsed: float, modulus: int) -> tuple[float, bool]:
    if cur >= prev:  # nearly always: no wrap or reset to judge
        return (cur - prev) / elapsed, False
    d, step = delta(prev, cur, modulus)
    return d / elapsed, step is Step.RESET


_SOFTNET_RATES = ("softnet_processed_per_s", "softnet_dropped_per_s", "time_squeeze_per_s",
                  "received_rps_per_s", "flow_limit_per_s")
_SOFTNET = operator.attrgetter("processed", "dropped", "time_squeeze", "received_rps", "flow_limit_count")


def cpu_rates(prev: Snapshot, cur: Snapshot, elapsed: float) -> dict[int, CpuRates]:
    cpus = sorted(set(cur.online_cpus) | set(cur.cpu_times) | set(prev.cpu_times))
    out: dict[int, CpuRates] = {}
    for cpu in cpus:
        a, b = prev.cpu_times.get(cpu), cur.cpu_times.get(cpu)
        if b is None and a is None and cpu not in cur.softnet:
            continue
        presence = Presence.BOTH if (a and b) else (Presence.NEW if b else Presence.GONE)
        fields: dict[str, float | int | bool | None] = {}
        reset = False
        if a and b:
            pcts, reset = _time_split(a, b)
            fields.update(pcts)
        sa, sb = prev.softirqs.get(cpu), cur.softirqs.get(cpu)
        if sa and sb:
            fields["net_rx_per_s"], r1 = _per_s(sa.net_rx, sb.net_rx, elapsed, U32)
            fields["net_tx_per_s"], r2 = _per_s(sa.net_tx, sb.net_tx, elapsed, U32)
            reset |= r1 or r2
        na, nb = prev.softnet.get(cpu), cur.softnet.get(cpu)
        if nb is not None:
            fields["backlog"] = nb.backlog
        if na and nb:
            for name, x, y in zip(_SOFTNET_RATES, _SOFTNET(na), _SOFTNET(nb)):
                fields[name], r = _per_s(x, y, elapsed, U32)
                reset |= r
        out[cpu] = CpuRates(cpu=cpu, presence=presence, reset=reset, **fields)  # type: ignore[arg-type]
    return out


def _time_split(a: CpuTimes, b: CpuTimes) -> tuple[dict[str, float], bool]:
    """Percent of elapsed CPU ticks per state; a backwards total means the CPU was reset."""
    total = b.total - a.total
    va, vb = _TIMES(a), _TIMES(b)
    if total <= 0 or any(y < x for x, y in zip(va, vb)):
        return dict.fromkeys(_PCT_NAMES, 0.0), total < 0
    return {name: 100.0 * (y - x) / total for name, x, y in zip(_PCT_NAMES, va, vb)}, False


_TIME_FIELDS = ("user", "system", "idle", "iowait", "irq", "softirq", "steal")
_TIMES = operator.attrgetter(*_TIME_FIELDS)
_PCT_NAMES = tuple(f"{f}_pct" for f in _TIME_FIELDS)


def irq_rates(prev: Snapshot, cur: Snapshot, elapsed: float) -> dict[int, IrqRates]:
    """Rates of the IRQs whose counts were parsed in both snapshots."""
    out: dict[int, IrqRates] = {}
    pcpus, ccpus = prev.interrupts.cpus, cur.interrupts.cpus
    for irq, b in cur.interrupts.irqs.items():
        a = prev.interrupts.irqs.get(irq)
        if b.counts is None:
            continue
        if a is None or a.counts is None:
            out[irq] = IrqRates(irq, Presence.NEW if a is None else Presence.BOTH)
            continue
        out[irq] = _one_irq(a, b, pcpus, ccpus, elapsed)
    for irq in prev.interrupts.irqs.keys() - cur.interrupts.irqs.keys():
        out[irq] = IrqRates(irq, Presence.GONE)
    return out


def _one_irq(a: Irq, b: Irq, pcpus: tuple[int, ...], ccpus: tuple[int, ...],
             elapsed: float) -> IrqRates:
    assert a.counts is not None and b.counts is not None
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
        if cnt >= old:  # inline: only a backwards count needs `delta`'s judgement
            r = (cnt - old) / elapsed
        else:
            r, was_reset = _per_s(old, cnt, elapsed, U32)
            reset |= was_reset
        per_cpu[cpu] = r
        total += r
    return IrqRates(b.irq, Presence.BOTH, total, per_cpu, reset)


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
    fields: dict[str, float] = {}
    reset = False
    for f in _LINK_FIELDS:
        fields[f"{f}_per_s"], r = _per_s(getattr(a, f), getattr(b, f), elapsed, U64)
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
        return None if x is None or y is None else _per_s(x, y, elapsed, U64)[0]

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
                bytes_per_s=_per_s(a.bytes, q.bytes, elapsed, U64)[0],
                packets_per_s=_per_s(a.packets, q.packets, elapsed, U32)[0],
                drops_per_s=_per_s(a.drops, q.drops, elapsed, U32)[0],
                overlimits_per_s=_per_s(a.overlimits, q.overlimits, elapsed, U32)[0],
                requeues_per_s=_per_s(a.requeues, q.requeues, elapsed, U32)[0],
            ))
        out[ifname] = tuple(rows)
    return out


def compute_rates(prev: Snapshot, cur: Snapshot) -> Rates:
    """All rates between two snapshots of the same host, from their real elapsed time."""
    elapsed = cur.t_mono - prev.t_mono
    if elapsed <= 0:
        raise ValueError(f"snapshots are not in time order (elapsed {elapsed:.6f} s)")
    return Rates(
        t_wall=cur.t_wall,
        elapsed_s=elapsed,
        cpus=cpu_rates(prev, cur, elapsed),
        irqs=irq_rates(prev, cur, elapsed),
        links=link_rates(prev, cur, elapsed),
        qdiscs=qdisc_rates(prev, cur, elapsed),
        sampler_cpu_pct=100.0 * cur.read_cpu_s / elapsed,
    )
