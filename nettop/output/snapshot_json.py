"""The `nettop snapshot --json` document: two snapshots and their rates as plain JSON.

The schema is documented in docs/snapshot-json.md; field names here are part of the
public interface (scripts compare hosts with them), so they only ever get added to.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from nettop.ebpf.sample import to_json as ebpf_json
from nettop.ping.stats import to_json
from nettop.model.rates import LinkRates, Rates
from nettop.model.snapshot import Snapshot
from nettop.output.device_doc import qdisc_doc, queue_docs, rounded as _r

SCHEMA = "nettop.snapshot/1"


def _iso(t: float) -> str | None:
    """UTC ISO time of a wall-clock stamp; None for one no calendar holds (a corrupt
    recording), instead of an exception from datetime."""
    try:
        return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat()
    except (OverflowError, ValueError, OSError):
        return None


def build_document(prev: Snapshot, cur: Snapshot, rates: Rates, requested_interval: float | None = None) -> dict[str, Any]:
    """The whole JSON document for the interval between `prev` and `cur`."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "host": cur.host,
        "kernel": cur.kernel,
        "time": _iso(cur.t_wall),
        "interval_s": round(rates.elapsed_s, 6),
        "requested_interval_s": requested_interval,
        "online_cpus": list(cur.online_cpus),
        "cpus": [_cpu(c) for _, c in sorted(rates.cpus.items())],
        "interfaces": {name: _interface(name, cur, rates) for name in sorted(cur.links)},
        "irqs": _irqs(cur, rates),
        "totals": _totals(cur, rates),
        "host_config": {
            "default_qdisc": cur.host_config.default_qdisc,
            "irqbalance_running": cur.host_config.irqbalance_running,
            "rps_sock_flow_entries": cur.host_config.rps_sock_flow_entries,
            "sysctls": dict(cur.host_config.sysctls),
        },
        "nettop": {
            "sampler_cpu_ms_per_tick": round(1000 * cur.read_cpu_s, 3),
            "sampler_cpu_pct": _r(rates.sampler_cpu_pct),
        },
        "latency": {target: to_json(stats) for target, stats in cur.latency.items()},
        "ebpf": ebpf_json(cur.ebpf) if cur.ebpf is not None else None,
        "problems": [p.message for p in cur.problems]
        + [p.message for p in rates.problems]
        + [f"ping {t}: {s.error}" for t, s in cur.latency.items() if s.error],
    }
    return doc


def _cpu(c: Any) -> dict[str, Any]:
    return {
        "cpu": c.cpu,
        "status": c.presence.value,
        "softirq_pct": _r(c.softirq_pct),
        "irq_pct": _r(c.irq_pct),
        "user_pct": _r(c.user_pct),
        "system_pct": _r(c.system_pct),
        "idle_pct": _r(c.idle_pct),
        "iowait_pct": _r(c.iowait_pct),
        "steal_pct": _r(c.steal_pct),
        "net_rx_per_s": _r(c.net_rx_per_s),
        "net_tx_per_s": _r(c.net_tx_per_s),
        "softnet_processed_per_s": _r(c.softnet_processed_per_s),
        "softnet_dropped_per_s": _r(c.softnet_dropped_per_s),
        "time_squeeze_per_s": _r(c.time_squeeze_per_s),
        "received_rps_per_s": _r(c.received_rps_per_s),
        "flow_limit_per_s": _r(c.flow_limit_per_s),
        "backlog": c.backlog,
        "counter_reset": c.reset,
    }


def _interface(name: str, cur: Snapshot, rates: Rates) -> dict[str, Any]:
    link = cur.links[name]
    lr: LinkRates | None = rates.links.get(name)
    dev = cur.devices.get(name)
    qmap = cur.queue_maps.get(name)
    qstats = cur.queue_stats.get(name)
    out: dict[str, Any] = {
        "ifindex": link.ifindex,
        "status": lr.presence.value if lr else "new",
        "operstate": link.operstate,
        "mtu": link.mtu,
        "txqueuelen": link.txqueuelen,
        "speed_mbps": link.speed_mbps,
        "kind": link.kind,
        "master": link.master,
        "aggregate": link.is_aggregate,
        "driver": (dev.driver if dev else None) or link.driver,
        "numa_node": dev.numa_node if dev else None,
        "bus_info": dev.bus_info if dev else None,
        "rx_bytes_per_s": _r(lr.rx_bytes_per_s) if lr else None,
        "tx_bytes_per_s": _r(lr.tx_bytes_per_s) if lr else None,
        "rx_packets_per_s": _r(lr.rx_packets_per_s) if lr else None,
        "tx_packets_per_s": _r(lr.tx_packets_per_s) if lr else None,
        "rx_errors_per_s": _r(lr.rx_errors_per_s) if lr else None,
        "tx_errors_per_s": _r(lr.tx_errors_per_s) if lr else None,
        "rx_dropped_per_s": _r(lr.rx_dropped_per_s) if lr else None,
        "tx_dropped_per_s": _r(lr.tx_dropped_per_s) if lr else None,
        "counters": {
            "rx_bytes": link.rx_bytes, "tx_bytes": link.tx_bytes,
            "rx_packets": link.rx_packets, "tx_packets": link.tx_packets,
            "rx_dropped": link.rx_dropped, "tx_dropped": link.tx_dropped,
            "rx_errors": link.rx_errors, "tx_errors": link.tx_errors,
        },
        "counter_reset": lr.reset if lr else False,
        "qdisc": qdisc_doc(cur.qdiscs.get(name, ()), rates.qdiscs.get(name, ())),
        "queue_map_source": qmap.source if qmap else "none",
        "queue_stats_source": qstats.source if qstats else "none",
        "other_irqs": list(qmap.other_irqs) if qmap else [],
        "coalesce": dict(dev.coalesce) if dev and dev.coalesce is not None else None,
        "rings": dict(dev.rings) if dev and dev.rings is not None else None,
        "channels": dict(dev.channels) if dev and dev.channels is not None else None,
        "queues": queue_docs(name, cur, rates, dev, qmap.queues if qmap else ()),
    }
    return out


def _irqs(cur: Snapshot, rates: Rates) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for irq, r in sorted(rates.irqs.items()):
        info = cur.interrupts.irqs.get(irq)
        out[str(irq)] = {
            "name": info.name if info else None,
            "status": r.presence.value,
            "per_s": _r(r.per_s),
            "per_cpu_per_s": {str(c): _r(v) for c, v in sorted(r.per_cpu_per_s.items())},
        }
    return out


def _totals(cur: Snapshot, rates: Rates) -> dict[str, float]:
    """Host totals over physical-ish links: members of bonds/bridges count via the
    aggregate, never twice, and loopback is left out."""
    tot = {"rx_bytes_per_s": 0.0, "tx_bytes_per_s": 0.0, "rx_packets_per_s": 0.0, "tx_packets_per_s": 0.0}
    for name, link in cur.links.items():
        if name == "lo" or link.master is not None:
            continue
        lr = rates.links.get(name)
        if lr is None:
            continue
        for k in tot:
            v = getattr(lr, k)
            if v is not None:
                tot[k] += v
    return {k: round(v, 3) for k, v in tot.items()}
