"""One phase's figures: a variant under load, from nettop's snapshots, the prober and iperf3.

Rates come from the first and last snapshot of the measure window (compute_rates over
the whole window: the counters' own deltas, not an average of per-sample rates). RTT
percentiles come from every probe of the window (the tracker's raw RTTs), not from
per-sample summaries. Throughput is reported twice: from the interface counters in the
load's direction over the window, and as iperf3 measured it over its whole run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from nettop.model.rates import compute_rates
from nettop.model.snapshot import Snapshot
from nettop.ping.stats import percentile


@dataclass(frozen=True)
class Phase:
    variant: str
    repeat: int
    failed: str | None = None
    tput_bps: float | None = None
    iperf_bps: float | None = None
    retransmits: int | None = None
    rtt_idle_p50: float | None = None
    rtt_idle_p99: float | None = None
    rtt_load_p50: float | None = None
    rtt_load_p99: float | None = None
    loss_load_pct: float | None = None
    softirq_pct: float | None = None  # summed over CPUs: % of one CPU
    hardirq_pct: float | None = None
    irq_per_s: float | None = None  # the interface's queue IRQs
    irq_per_queue: dict[str, float] = field(default_factory=dict)
    drops_per_s: float | None = None  # softnet + qdisc + interface drops
    time_squeeze_per_s: float | None = None

    def to_event_text(self) -> str:
        return "result " + json.dumps(asdict(self), separators=(",", ":"), allow_nan=False)

    @staticmethod
    def from_event_text(text: str) -> Phase | None:
        if not text.startswith("result "):
            return None
        try:
            doc = json.loads(text[7:])
            return Phase(**{k: doc.get(k) for k in Phase.__dataclass_fields__ if k in doc})
        except (ValueError, TypeError):
            return None


def _pcts(rtts: Sequence[float]) -> tuple[float | None, float | None]:
    if not rtts:
        return None, None
    s = sorted(rtts)
    return percentile(s, 50), percentile(s, 99)


def _sum(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) if got else None


def figures(variant: str, repeat: int, window: Sequence[Snapshot], iface: str, reverse: bool,
            idle_rtts: Sequence[float], load_rtts: Sequence[float], sent: int,
            iperf: Sequence[dict[str, Any]], failed: str | None = None) -> Phase:
    idle50, idle99 = _pcts(idle_rtts)
    load50, load99 = _pcts(load_rtts)
    loss = 100.0 * (1 - len(load_rtts) / sent) if sent else None
    bps = [_iperf_bps(doc) for doc in iperf]
    retrans = [_retransmits(doc) for doc in iperf]
    common: dict[str, Any] = dict(
        rtt_idle_p50=idle50, rtt_idle_p99=idle99, rtt_load_p50=load50, rtt_load_p99=load99,
        loss_load_pct=None if loss is None else max(0.0, loss),
        iperf_bps=_sum(bps) if bps and None not in bps else None,
        retransmits=int(sum(r for r in retrans if r is not None)) if any(r is not None for r in retrans) else None)
    if len(window) < 2:
        return Phase(variant, repeat, failed or "no samples in the measure window", **common)
    a, b = window[0], window[-1]
    r = compute_rates(a, b)
    link = r.links.get(iface)
    tput = None
    if link is not None:
        per_s = link.rx_bytes_per_s if reverse else link.tx_bytes_per_s
        tput = None if per_s is None else 8 * per_s
    cpus = list(r.cpus.values())
    per_queue: dict[str, float] = {}
    qmap = b.queue_maps.get(iface)
    if qmap is not None:
        for q in qmap.queues:
            total = sum((r.irqs[i].per_s or 0.0) for i in q.irqs if i in r.irqs)
            per_queue[f"{q.kind}-{q.index}"] = per_queue.get(f"{q.kind}-{q.index}", 0.0) + total
    qdisc_drops = sum((q.drops_per_s or 0.0) for q in r.qdiscs.get(iface, ()) if q.parent == "root")
    link_drops = (link.rx_dropped_per_s or 0.0) + (link.tx_dropped_per_s or 0.0) if link else 0.0
    softnet = _sum([c.softnet_dropped_per_s for c in cpus]) or 0.0
    return Phase(variant, repeat, failed, tput_bps=tput, softirq_pct=_sum([c.softirq_pct for c in cpus]),
                 hardirq_pct=_sum([c.irq_pct for c in cpus]), irq_per_s=sum(per_queue.values()) if per_queue else None,
                 irq_per_queue=per_queue, drops_per_s=softnet + qdisc_drops + link_drops,
                 time_squeeze_per_s=_sum([c.time_squeeze_per_s for c in cpus]), **common)


def _iperf_bps(doc: dict[str, Any]) -> float | None:
    end = doc.get("end") or {}
    for key in ("sum_received", "sum"):
        s = end.get(key)
        if isinstance(s, dict) and isinstance(s.get("bits_per_second"), (int, float)):
            return float(s["bits_per_second"])
    return None


def _retransmits(doc: dict[str, Any]) -> int | None:
    s = (doc.get("end") or {}).get("sum_sent")
    v = s.get("retransmits") if isinstance(s, dict) else None
    return int(v) if isinstance(v, int) else None
