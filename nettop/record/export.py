"""Rates per sample of a recording as flat rows: CSV or JSON for pandas and spreadsheets.

Rows are computed exactly as live: `compute_rates(prev, cur)` over consecutive intact
snapshots. Column names are dotted paths, e.g. `link.eth0.rx_bytes_per_s`,
`cpu.3.softirq_pct`, `irq.57.per_s`, `qdisc.eth0.8001:.drops_per_s`,
`latency.10.0.0.1.rtt_avg_ms`; a value that does not exist in a sample is empty.
"""

from __future__ import annotations

import csv
import json
import sys
from typing import Any, Iterator, TextIO

from nettop.model.rates import Rates, compute_rates
from nettop.record.series import Recording, open_recording
from nettop.model.snapshot import Snapshot

LINK_FIELDS = ("rx_bytes_per_s", "tx_bytes_per_s", "rx_packets_per_s", "tx_packets_per_s",
               "rx_errors_per_s", "tx_errors_per_s", "rx_dropped_per_s", "tx_dropped_per_s")
CPU_FIELDS = ("user_pct", "system_pct", "irq_pct", "softirq_pct", "idle_pct", "net_rx_per_s",
              "net_tx_per_s", "softnet_processed_per_s", "softnet_dropped_per_s", "time_squeeze_per_s")
QDISC_FIELDS = ("bytes_per_s", "packets_per_s", "drops_per_s", "overlimits_per_s", "requeues_per_s")
LATENCY_FIELDS = ("sent", "received", "loss_pct", "rtt_avg_ms", "rtt_p99_ms", "rtt_max_ms")


def pairs(reader: Recording) -> Iterator[tuple[Snapshot, Rates]]:
    """(snapshot, rates over the interval ending with it) for every intact sample after the first."""
    prev: Snapshot | None = None
    for snap in reader.snapshots():
        if prev is not None and snap.t_mono > prev.t_mono:
            yield snap, compute_rates(prev, snap)
        prev = snap


def flat_row(snap: Snapshot, rates: Rates) -> dict[str, Any]:
    row: dict[str, Any] = {"t_wall": round(snap.t_wall, 6), "elapsed_s": round(rates.elapsed_s, 6)}
    for name, lr in sorted(rates.links.items()):
        for f in LINK_FIELDS:
            v = getattr(lr, f)
            if v is not None:
                row[f"link.{name}.{f}"] = v
        for q in lr.queues:
            if q.packets_per_s is not None:
                row[f"link.{name}.{q.kind}-{q.index}.packets_per_s"] = q.packets_per_s
            if q.bytes_per_s is not None:
                row[f"link.{name}.{q.kind}-{q.index}.bytes_per_s"] = q.bytes_per_s
    for cpu, cr in sorted(rates.cpus.items()):
        for f in CPU_FIELDS:
            v = getattr(cr, f)
            if v is not None:
                row[f"cpu.{cpu}.{f}"] = v
    for irq, ir in sorted(rates.irqs.items()):
        if ir.per_s is not None:
            row[f"irq.{irq}.per_s"] = ir.per_s
    for ifname, qds in sorted(rates.qdiscs.items()):
        for qd in qds:
            for f in QDISC_FIELDS:
                v = getattr(qd, f)
                if v is not None:
                    row[f"qdisc.{ifname}.{qd.handle}.{f}"] = v
    for target, ls in sorted(snap.latency.items()):
        for f in LATENCY_FIELDS:
            v = getattr(ls, f)
            if v is not None:
                row[f"latency.{target}.{f}"] = v
    if rates.sampler_cpu_pct is not None:
        row["nettop.sampler_cpu_pct"] = rates.sampler_cpu_pct
    return row


def rows(reader: Recording) -> list[dict[str, Any]]:
    return [flat_row(s, r) for s, r in pairs(reader)]


def write_csv(data: list[dict[str, Any]], out: TextIO) -> None:
    columns: dict[str, None] = {}
    for r in data:
        columns.update(dict.fromkeys(r))
    w = csv.DictWriter(out, fieldnames=list(columns), restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(data)


def write_json(reader: Recording, data: list[dict[str, Any]], out: TextIO) -> None:
    """{"meta": {...}, "samples": [flat rows], "events": [...]}; pandas: DataFrame(doc["samples"])."""
    doc = {
        "meta": reader.meta,
        "samples": data,
        "events": [{"t_wall": e.t_wall, "kind": e.kind, "text": e.text} for e in reader.events()],
        "warnings": reader.warnings,
    }
    json.dump(doc, out, separators=(",", ":"))
    out.write("\n")


def export(path: str, fmt: str, output: str | None = None, since: float | None = None,
           until: float | None = None) -> int:
    """`nettop export FILE|DIR --format csv|json [--since T] [--until T]`; damage is one
    line on stderr, the rest exported."""
    reader = open_recording(path, since, until)
    try:
        data = rows(reader)
        out = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
        try:
            if fmt == "csv":
                write_csv(data, out)
            else:
                write_json(reader, data, out)
        finally:
            if output:
                out.close()
        for w in reader.warnings:
            print(f"nettop: {w}", file=sys.stderr)
    finally:
        reader.close()
    return 0
