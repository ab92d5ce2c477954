"""The per-interface parts of the JSON document that the live view's tables draw too.

The qdisc tree and the per-queue join (queue map + IRQ affinity + RPS/XPS + BQL + per-queue
rates) are built once here, for `nettop snapshot --json` (snapshot_json.py) and for the
queue and qdisc rows of the TUI (tui/model.py), so the two always agree. The field names
are part of the JSON schema (docs/snapshot-json.md): they only ever get added to.
"""

from __future__ import annotations

from typing import Any

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


def queue_docs(name: str, cur: Snapshot, rates: Rates, dev: DeviceConfig | None,
            mapped: tuple[QueueIrqs, ...]) -> list[dict[str, Any]]:
    """One entry per queue of `name`: its IRQs and their rates and affinity, RPS/XPS, BQL and
    per-queue packet rates, joined by (kind, index); the queues sysfs knows when no map does."""
    cfg: dict[tuple[str, int], QueueConfig] = {(q.kind, q.index): q for q in (dev.queues if dev else ())}
    bql = {b.queue: b for b in (dev.bql if dev else ())}
    lr = rates.links.get(name)
    qrates = {(q.kind, q.index): q for q in (lr.queues if lr else ())}
    rows = list(mapped)
    if not rows:  # no map: still show the queues sysfs knows
        rows = [QueueIrqs(k, i) for (k, i) in sorted(cfg)]
    out = []
    now = cur.t_mono
    for q in rows:
        kinds = ("rx", "tx") if q.kind == "combined" else (q.kind,)
        read_at: list[float | None] = [a.read_at for i in q.irqs if (a := cur.irq_affinity.get(i))]
        irq_rates = [rates.irqs.get(i) for i in q.irqs]
        per_s = [r.per_s for r in irq_rates if r is not None and r.per_s is not None]
        aff = [cur.irq_affinity.get(i) for i in q.irqs]
        row: dict[str, Any] = {
            "kind": q.kind,
            "index": q.index,
            "irqs": list(q.irqs),
            "napi_id": q.napi_id,
            "irq_per_s": rounded(sum(per_s)) if per_s else (0.0 if not q.irqs else None),
            "affinity": _cpu_union(a.affinity for a in aff if a),
            "effective_affinity": _cpu_union(a.effective for a in aff if a),
            "affinity_hint": _cpu_union(a.hint for a in aff if a),
            "irqs_managed": _managed(aff),
        }
        row["affinity_list"] = format_cpu_list(row["affinity"]) if row["affinity"] is not None else None
        row["effective_affinity_list"] = (
            format_cpu_list(row["effective_affinity"]) if row["effective_affinity"] is not None else None)
        for k in kinds:
            qr = qrates.get((k, q.index))
            row[f"{k}_packets_per_s"] = rounded(qr.packets_per_s) if qr else None
            row[f"{k}_bytes_per_s"] = rounded(qr.bytes_per_s) if qr else None
            c = cfg.get((k, q.index))
            read_at.append(c.read_at if c else None)
            if k == "rx":
                row["rps_cpus"] = c.rps_cpus if c else None
                row["rps_flow_cnt"] = c.rps_flow_cnt if c else None
            else:
                row["xps_cpus"] = c.xps_cpus if c else None
                b = bql.get(q.index)
                read_at.append(b.read_at if b else None)
                row["bql"] = ({"limit": b.limit, "limit_max": b.limit_max, "limit_min": b.limit_min,
                               "inflight": b.inflight} if b else None)
        # the oldest of the row's settings: 0 when all were read this tick (settings off
        # screen are read in rotation, nettop/collectors/settings_rotation.py)
        row["settings_age_s"] = rounded(max((setting_age(now, t) for t in read_at), default=0.0))
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
