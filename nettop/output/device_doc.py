"""The per-interface parts of the JSON document that the live view's tables draw too.

The qdisc tree and the per-queue join (queue map + IRQ affinity + RPS/XPS + BQL + per-queue
rates) are built once here, for `nettop snapshot --json` (snapshot_json.py) and for the
queue and qdisc rows of the TUI (tui/model.py), so the two always agree. The field names
are part of the JSON schema (docs/snapshot-json.md): they only ever get added to.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterable

from nettop.collectors.cpus import format_cpu_list
from nettop.model.rates import QdiscRates, Rates
from nettop.model.snapshot import DeviceConfig, QdiscStats, QueueConfig, QueueIrqs, Snapshot, setting_age


def rounded(x: float | None, nd: int = 3) -> float | None:
    """A figure as the document prints it: `nd` decimals, None kept."""
    return None if x is None else round(x, nd)


def qdisc_doc(qds: tuple[QdiscStats, ...], qrs: tuple[QdiscRates, ...]) -> dict[str, Any] | None:
    """The interface's qdisc tree: the root qdisc with its counters and rates, its children
    and the ingress qdisc; None when it has none."""
    if not qds:
        return None
    by_key = {(r.handle, r.parent, r.kind): r for r in qrs}

    def one(q: QdiscStats) -> dict[str, Any]:
        r = by_key.get((q.handle, q.parent, q.kind))
        return {
            "kind": q.kind, "handle": q.handle, "parent": q.parent,
            "backlog_bytes": q.backlog_bytes, "backlog_packets": q.backlog_packets,
            "drops": q.drops, "overlimits": q.overlimits, "requeues": q.requeues,
            "bytes_per_s": rounded(r.bytes_per_s) if r else None,
            "packets_per_s": rounded(r.packets_per_s) if r else None,
            "drops_per_s": rounded(r.drops_per_s) if r else None,
            "overlimits_per_s": rounded(r.overlimits_per_s) if r else None,
            "requeues_per_s": rounded(r.requeues_per_s) if r else None,
        }

    roots = [q for q in qds if q.parent == "root"]
    top = roots[0] if roots else qds[0]
    doc = one(top)
    doc["children"] = [one(q) for q in qds if q is not top and q.parent != "ingress"]
    ingress = [q for q in qds if q.parent == "ingress"]
    if ingress:
        doc["ingress"] = one(ingress[0])
    return doc


@dataclass(frozen=True, slots=True)
class QueueJoin:
    """One queue's parts, joined by (kind, index) from the queue map, the IRQ affinity, the
    queue config (RPS/XPS), BQL and the per-queue rates: what `queue_docs` formats for
    the JSON and the TUI's queue table turns into rows (512 queues a tick at 4 x 128
    queues, so the table does not build the JSON's dicts and CPU-list strings)."""

    q: QueueIrqs
    aff: tuple[Any, ...]  # the IRQs' IrqAffinity (None where unknown)
    irq_per_s: float | None  # rounded; 0.0 for a queue without IRQs, None when none has a rate
    kinds: tuple[str, ...]  # ("rx", "tx") for a combined queue
    rates: tuple[Any, ...]  # QueueRates per kind, or None
    cfg: tuple[QueueConfig | None, ...]  # per kind
    bql: Any  # BqlState of the tx side, or None
    settings_age_s: float | None  # the oldest of its settings (0 when all read this tick)

    def union(self, what: str) -> list[int] | None:
        """The CPUs of the IRQs' `affinity`, `effective` or `hint` together."""
        return _cpu_union(getattr(a, what) for a in self.aff if a)

    def side(self, kind: str) -> tuple[Any, QueueConfig | None] | None:
        """(QueueRates, QueueConfig) of one side, or None when the queue has no such side."""
        for k, r, c in zip(self.kinds, self.rates, self.cfg):
            if k == kind:
                return r, c
        return None


class QueueJoiner:
    """One interface's lookups (queue config, BQL and per-queue rates by (kind, index)),
    made once so each queue can be joined on its own: the TUI's queue table sorts all of
    an interface's queues (4 x 128 on a big host) but joins only the rows it draws."""

    __slots__ = ("cfg", "bql", "qrates", "now", "aff_of", "irq_rates")

    def __init__(self, name: str, cur: Snapshot, rates: Rates, dev: DeviceConfig | None) -> None:
        self.cfg: dict[tuple[str, int], QueueConfig] = {(q.kind, q.index): q for q in (dev.queues if dev else ())}
        self.bql = {b.queue: b for b in (dev.bql if dev else ())}
        lr = rates.links.get(name)
        self.qrates = {(q.kind, q.index): q for q in (lr.queues if lr else ())}
        self.now = cur.t_mono
        self.aff_of, self.irq_rates = cur.irq_affinity, rates.irqs

    def queues(self, mapped: tuple[QueueIrqs, ...]) -> list[QueueIrqs]:
        """The mapped queues; the queues sysfs knows when no map does."""
        return list(mapped) or [QueueIrqs(k, i) for (k, i) in sorted(self.cfg)]

    def irq_per_s(self, q: QueueIrqs) -> float | None:
        """The queue's IRQs/s together, rounded; 0.0 without IRQs, None when none has a rate."""
        irq_rates = self.irq_rates
        per_s = [r.per_s for i in q.irqs if (r := irq_rates.get(i)) is not None and r.per_s is not None]
        return rounded(sum(per_s)) if per_s else (0.0 if not q.irqs else None)

    def settings_age(self, q: QueueIrqs, aff: tuple[Any, ...] | None = None) -> float:
        """The oldest of the queue's settings (IRQ affinity, RPS/XPS, BQL), rounded: 0 when
        all were read this tick (settings off screen are read in rotation,
        nettop/collectors/settings_rotation.py)."""
        aff_of, cfg, index = self.aff_of, self.cfg, q.index
        oldest: float | None = None  # the earliest read_at: its age is the largest
        for a in (aff if aff is not None else (aff_of.get(i) for i in q.irqs)):
            if a and a.read_at is not None and (oldest is None or a.read_at < oldest):
                oldest = a.read_at
        kind = q.kind
        for k in (("rx", "tx") if kind == "combined" else (kind,)):
            c = cfg.get((k, index))
            if c is not None and c.read_at is not None and (oldest is None or c.read_at < oldest):
                oldest = c.read_at
        if kind == "tx" or kind == "combined":
            b = self.bql.get(index)
            if b is not None and b.read_at is not None and (oldest is None or b.read_at < oldest):
                oldest = b.read_at
        return rounded(setting_age(self.now, oldest))  # type: ignore[return-value]

    def read_ats(self, queues: Iterable[QueueIrqs]) -> list[float]:
        """The `read_at` of every setting `settings_age` looks at for `queues` (and of the
        interface's other queue settings): each queue's age is that of one of them."""
        aff_of = self.aff_of
        ats = [c.read_at for c in self.cfg.values()]
        ats += [b.read_at for b in self.bql.values()]
        ats += [a.read_at for a in map(aff_of.get, chain.from_iterable(q.irqs for q in queues)) if a]
        return [t for t in ats if t is not None]

    def effective(self, q: QueueIrqs) -> list[int] | None:
        """The CPUs the queue's IRQs are served on (`QueueJoin.union("effective")`)."""
        aff_of = self.aff_of
        return _cpu_union(a.effective for i in q.irqs if (a := aff_of.get(i)))

    def join(self, q: QueueIrqs) -> QueueJoin:
        kinds = ("rx", "tx") if q.kind == "combined" else (q.kind,)
        aff = tuple(self.aff_of.get(i) for i in q.irqs)
        cs = tuple(self.cfg.get((k, q.index)) for k in kinds)
        b = self.bql.get(q.index) if "tx" in kinds else None
        return QueueJoin(q, aff, self.irq_per_s(q), kinds, tuple(self.qrates.get((k, q.index)) for k in kinds),
                         cs, b, self.settings_age(q, aff))


def queue_joins(name: str, cur: Snapshot, rates: Rates, dev: DeviceConfig | None,
                mapped: tuple[QueueIrqs, ...]) -> list[QueueJoin]:
    """The parts of each queue of `name`; the queues sysfs knows when no map does."""
    joiner = QueueJoiner(name, cur, rates, dev)
    return [joiner.join(q) for q in joiner.queues(mapped)]


def queue_docs(name: str, cur: Snapshot, rates: Rates, dev: DeviceConfig | None,
               mapped: tuple[QueueIrqs, ...]) -> list[dict[str, Any]]:
    """One entry per queue of `name`: its IRQs and their rates and affinity, RPS/XPS, BQL and
    per-queue packet rates (`queue_joins`)."""
    out = []
    for j in queue_joins(name, cur, rates, dev, mapped):
        q = j.q
        row: dict[str, Any] = {
            "kind": q.kind,
            "index": q.index,
            "irqs": list(q.irqs),
            "napi_id": q.napi_id,
            "irq_per_s": j.irq_per_s,
            "affinity": j.union("affinity"),
            "effective_affinity": j.union("effective"),
            "affinity_hint": j.union("hint"),
            "irqs_managed": _managed(list(j.aff)),
        }
        row["affinity_list"] = format_cpu_list(row["affinity"]) if row["affinity"] is not None else None
        row["effective_affinity_list"] = (
            format_cpu_list(row["effective_affinity"]) if row["effective_affinity"] is not None else None)
        for k, qr, c in zip(j.kinds, j.rates, j.cfg):
            row[f"{k}_packets_per_s"] = rounded(qr.packets_per_s) if qr else None
            row[f"{k}_bytes_per_s"] = rounded(qr.bytes_per_s) if qr else None
            if k == "rx":
                row["rps_cpus"] = c.rps_cpus if c else None
                row["rps_flow_cnt"] = c.rps_flow_cnt if c else None
            else:
                row["xps_cpus"] = c.xps_cpus if c else None
                b = j.bql
                row["bql"] = ({"limit": b.limit, "limit_max": b.limit_max, "limit_min": b.limit_min,
                               "inflight": b.inflight} if b else None)
        row["settings_age_s"] = j.settings_age_s
        out.append(row)
    return out


def _managed(aff: list[Any]) -> bool | None:
    """True when any of the queue's IRQs refuses new affinity, None when not known."""
    flags = [a.managed for a in aff if a is not None]
    if any(f is True for f in flags):
        return True
    return False if flags and all(f is False for f in flags) else None


def _cpu_union(lists: Any) -> list[int] | None:
    seen: set[int] = set()
    any_known = False
    for cpus in lists:
        if cpus is None:
            continue
        any_known = True
        seen.update(cpus)
    return sorted(seen) if any_known else None
