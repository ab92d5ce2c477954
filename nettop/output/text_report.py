"""Plain-text rendering of a snapshot document, and a minimal refreshing live view.

This is the fallback screen for terminals and scripts without the full-screen UI: it
reads the same document `nettop snapshot --json` prints, so both always agree.
"""

from __future__ import annotations

from typing import Any



def _si(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.1f}{suffix}{unit}"
    return f"{x:.0f}{unit}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _basis(doc: dict[str, Any]) -> str:
    """What the rates are over: a live interval, or for a captured host (`rates_basis`)
    the uptime they are averaged over, the time between two captures, or nothing."""
    basis = doc.get("rates_basis")
    secs = doc.get("interval_s")
    if basis == "since_boot":
        return f"since-boot averages over {secs:.0f}s of uptime" if secs is not None else "since boot"
    if basis == "between_captures":
        return f"between captures {secs:.2f}s apart" if secs is not None else "between captures"
    if basis == "none" or secs is None:
        return "totals only (no interval)"
    return f"interval {secs:.2f}s"


def render(doc: dict[str, Any], width: int = 100) -> str:
    lines = [
        f"{doc['host']}  kernel {doc['kernel']}  {_basis(doc)}  "
        f"sampler {doc['nettop']['sampler_cpu_ms_per_tick']:.1f} ms/tick",
        "",
        f"{'CPU':>4} {'sirq%':>6} {'hirq%':>6} {'NET_RX/s':>9} {'NET_TX/s':>9} {'drop/s':>7} {'squeeze/s':>9} {'rps/s':>7}",
    ]
    for c in doc["cpus"]:
        lines.append(
            f"{c['cpu']:>4} {_pct(c['softirq_pct']):>6} {_pct(c['irq_pct']):>6} {_si(c['net_rx_per_s']):>9} "
            f"{_si(c['net_tx_per_s']):>9} {_si(c['softnet_dropped_per_s']):>7} {_si(c['time_squeeze_per_s']):>9} "
            f"{_si(c['received_rps_per_s']):>7}"
        )
    lines += ["", f"{'IFACE':<16} {'rx bit/s':>9} {'tx bit/s':>9} {'rx pkt/s':>9} {'tx pkt/s':>9} {'drops/s':>8} qdisc"]
    for name, i in doc["interfaces"].items():
        rxb = None if i["rx_bytes_per_s"] is None else 8 * i["rx_bytes_per_s"]
        txb = None if i["tx_bytes_per_s"] is None else 8 * i["tx_bytes_per_s"]
        drops = None
        if i["rx_dropped_per_s"] is not None and i["tx_dropped_per_s"] is not None:
            drops = i["rx_dropped_per_s"] + i["tx_dropped_per_s"]
        qd = i["qdisc"]["kind"] if i["qdisc"] else "-"
        lines.append(
            f"{name[:16]:<16} {_si(rxb):>9} {_si(txb):>9} {_si(i['rx_packets_per_s']):>9} "
            f"{_si(i['tx_packets_per_s']):>9} {_si(drops):>8} {qd}"
        )
        for q in i["queues"]:
            if not q["irqs"] and not q.get("rx_packets_per_s") and not q.get("tx_packets_per_s"):
                continue
            pk = q.get("rx_packets_per_s") if q["kind"] != "tx" else q.get("tx_packets_per_s")
            lines.append(
                f"  {q['kind']}-{q['index']:<3} irq {','.join(map(str, q['irqs'])) or '-':<10} "
                f"{_si(q['irq_per_s']):>7} irq/s  aff {q['affinity_list'] or '-'} "
                f"eff {q['effective_affinity_list'] or '-'}  {_si(pk)} pkt/s"
            )
    if doc["problems"]:
        lines += ["", *(f"! {p}" for p in doc["problems"][:5])]
    return "\n".join(line[:width] for line in lines) + "\n"
