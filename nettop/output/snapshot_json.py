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
from nettop.model.snapshot import Snapshot, setting_age
from nettop.output.device_doc import qdisc_doc, queue_docs, rounded as _r

SCHEMA = "nettop.snapshot/1"
# Additions within schema 1 (`schema` stays "nettop.snapshot/1": nothing was renamed or
# removed, so a consumer that checks it keeps working). 2: the raw totals next to each
# rate, `uptime_s`, `rates_basis`, CPU status `offline`, null counters a capture lacks.
SCHEMA_VERSION = 2


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
        "schema_version": SCHEMA_VERSION,
        "host": cur.host,
        "kernel": cur.kernel,
        "time": _iso(cur.t_wall),
        "interval_s": round(rates.elapsed_s, 6),
        "requested_interval_s": requested_interval,
        "rates_basis": "interval",
        "uptime_s": cur.uptime_s,
        "online_cpus": list(cur.online_cpus),
        "cpus": [{**_cpu(c), "totals": _cpu_totals(cur, c.cpu)} for _, c in sorted(rates.cpus.items())],
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
            "irq_counts_source": cur.irq_source,
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


def _cpu_totals(cur: Snapshot, cpu: int) -> dict[str, int | None]:
    """The raw counts of one CPU at the second sample that its rates came from: softnet
    columns (32-bit, they wrap), NET_RX/NET_TX softirqs, /proc/stat times in USER_HZ
    ticks; null where the file has no line for the CPU."""
    sn, sq, t = cur.softnet.get(cpu), cur.softirqs.get(cpu), cur.cpu_times.get(cpu)
    out: dict[str, int | None] = {
        "softnet_processed": sn.processed if sn else None,
        "softnet_dropped": sn.dropped if sn else None,
        "time_squeeze": sn.time_squeeze if sn else None,
        "received_rps": sn.received_rps if sn else None,
        "flow_limit_count": sn.flow_limit_count if sn else None,
        "net_rx": sq.net_rx if sq else None,
        "net_tx": sq.net_tx if sq else None,
    }
    for f in ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"):
        out[f"{f}_ticks"] = getattr(t, f) if t else None
    return out


def _queue_counters(cur: Snapshot, name: str) -> list[dict[str, Any]]:
    """Per-queue packets/bytes totals at the second sample (the queues' rates come
    from these), as the source gave them (netdev-qstats or ethtool -S)."""
    qs = cur.queue_stats.get(name)
    if qs is None:
        return []
    return [{"kind": q.kind, "index": q.index, "packets": q.packets, "bytes": q.bytes}
            for q in qs.queues]


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
        "queue_counters": _queue_counters(cur, name),
        "qdisc": qdisc_doc(cur.qdiscs.get(name, ()), rates.qdiscs.get(name, ())),
        "queue_map_source": qmap.source if qmap else "none",
        "queue_stats_source": qstats.source if qstats else "none",
        "other_irqs": list(qmap.other_irqs) if qmap else [],
        "coalesce": dict(dev.coalesce) if dev and dev.coalesce is not None else None,
        "rings": dict(dev.rings) if dev and dev.rings is not None else None,
        "channels": dict(dev.channels) if dev and dev.channels is not None else None,
        # off screen they are asked in rotation (collectors/nic_rotation.py): how old they are
        "nic_settings_age_s": _r(setting_age(cur.t_mono, dev.read_at)) if dev else None,
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
            "count": _irq_total(info),
            "per_cpu": ({str(c): n for c, n in zip(cur.interrupts.cpus, info.counts)}
                        if info is not None and info.counts is not None else None),
        }
    return out


def _irq_total(info: Any) -> int | None:
    if info is None:
        return None
    if info.total is not None:
        return int(info.total)
    return sum(info.counts) if info.counts is not None else None


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
