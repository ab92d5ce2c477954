"""`nettop report FILE`: a Markdown summary to paste into an incident ticket.

Peaks of throughput, softirq load, drops and latency, then every tuning change, mark or
problem with the figures of the minute before and the minute after it, and a text plot
of throughput where there is more than a handful of samples. All figures are the same
rates the live screen showed (see export.py).
"""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from nettop.rates import Rates
from nettop.record.export import pairs
from nettop.record.store import Reader
from nettop.snapshot import Snapshot
from nettop.timeline import Event

WINDOW_S = 60.0  # before/after averages around an event
EVENT_KINDS = ("tuning", "mark", "problem", "appeared", "vanished")


@dataclass(frozen=True, slots=True)
class Figures:
    """What one interval looked like, summed over the shown interfaces and CPUs."""

    t_wall: float
    elapsed_s: float
    rx_bytes_s: float
    tx_bytes_s: float
    busiest_link: str
    max_softirq_pct: float
    softirq_cpu: int | None
    drops_s: float  # softnet + interface + qdisc drops
    squeeze_s: float
    worst_rtt_ms: float | None
    worst_loss_pct: float | None


def figures(snap: Snapshot, rates: Rates) -> Figures:
    links = {n: r for n, r in rates.links.items()
             if r.rx_bytes_per_s is not None and not _is_aggregate(snap, n)}
    rx = sum(r.rx_bytes_per_s or 0.0 for r in links.values())
    tx = sum(r.tx_bytes_per_s or 0.0 for r in links.values())
    busiest = max(links, key=lambda n: (links[n].rx_bytes_per_s or 0) + (links[n].tx_bytes_per_s or 0), default="")
    soft = [(c.softirq_pct or 0.0, c.cpu) for c in rates.cpus.values() if c.softirq_pct is not None]
    top = max(soft, default=(0.0, None))
    drops = sum(c.softnet_dropped_per_s or 0.0 for c in rates.cpus.values())
    drops += sum((r.rx_dropped_per_s or 0.0) + (r.tx_dropped_per_s or 0.0) for r in links.values())
    drops += sum(q.drops_per_s or 0.0 for qs in rates.qdiscs.values() for q in qs if q.parent == "root")
    squeeze = sum(c.time_squeeze_per_s or 0.0 for c in rates.cpus.values())
    rtts = [s.rtt_max_ms for s in snap.latency.values() if s.rtt_max_ms is not None]
    losses = [s.loss_pct for s in snap.latency.values() if s.loss_pct is not None]
    return Figures(snap.t_wall, rates.elapsed_s, rx, tx, busiest, top[0], top[1], drops, squeeze,
                   max(rtts, default=None), max(losses, default=None))


def _is_aggregate(snap: Snapshot, name: str) -> bool:
    link = snap.links.get(name)
    return link is not None and (link.is_aggregate or name == "lo")


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _rate(v: float) -> str:
    bits = v * 8
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= div:
            return f"{bits / div:.2f} {unit}"
    return f"{bits:.0f} bit/s"


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _window(series: list[Figures], lo: float, hi: float) -> list[Figures]:
    return [f for f in series if lo <= f.t_wall < hi]


def _summary(rows: list[Figures]) -> dict[str, float | None]:
    rtts = [f.worst_rtt_ms for f in rows if f.worst_rtt_ms is not None]
    return {
        "throughput": _mean([f.rx_bytes_s + f.tx_bytes_s for f in rows]),
        "softirq": _mean([f.max_softirq_pct for f in rows]),
        "drops": _mean([f.drops_s for f in rows]),
        "rtt": max(rtts) if rtts else None,
    }


def _fmt(key: str, v: float | None) -> str:
    if v is None:
        return "–"
    return {"throughput": _rate, "softirq": lambda x: f"{x:.1f} %", "drops": lambda x: f"{x:.1f}/s",
            "rtt": lambda x: f"{x:.2f} ms"}[key](v)


def render(meta: dict[str, str], series: list[Figures], events: list[Event], warnings: list[str],
           plots: bool = True) -> str:
    out: list[str] = []
    host = meta.get("host", "?")
    out.append(f"# nettop recording: {host}\n")
    if not series:
        out.append("No two intact samples: nothing to report.\n")
        out += [f"> {w}\n" for w in warnings]
        return "\n".join(out)
    span = series[-1].t_wall - series[0].t_wall
    out.append(f"- kernel {meta.get('kernel', '?')}, {len(series) + 1} samples every "
               f"{float(meta.get('interval_s', 1)):g} s, {_when(series[0].t_wall)} to {_when(series[-1].t_wall)} "
               f"({span / 60:.1f} min)")
    out += [f"- warning: {w}" for w in warnings]
    out.append("\n## Peaks\n")
    out.append("| what | peak | when | where |\n|---|---|---|---|")
    tp = max(series, key=lambda f: f.rx_bytes_s + f.tx_bytes_s)
    out.append(f"| throughput (rx+tx, all interfaces) | {_rate(tp.rx_bytes_s + tp.tx_bytes_s)} | {_when(tp.t_wall)} | busiest {tp.busiest_link or '–'} |")
    sq = max(series, key=lambda f: f.max_softirq_pct)
    out.append(f"| softirq load of one CPU | {sq.max_softirq_pct:.1f} % | {_when(sq.t_wall)} | CPU {sq.softirq_cpu} |")
    dr = max(series, key=lambda f: f.drops_s)
    total_drops = sum(f.drops_s * f.elapsed_s for f in series)
    out.append(f"| drops (softnet + interfaces + root qdiscs) | {dr.drops_s:.1f}/s | {_when(dr.t_wall) if dr.drops_s else '–'} | {total_drops:.0f} in all |")
    ts = max(series, key=lambda f: f.squeeze_s)
    out.append(f"| time_squeeze | {ts.squeeze_s:.1f}/s | {_when(ts.t_wall) if ts.squeeze_s else '–'} | |")
    lat = [f for f in series if f.worst_rtt_ms is not None]
    if lat:
        w = max(lat, key=lambda f: f.worst_rtt_ms or 0.0)
        out.append(f"| worst latency (max RTT) | {w.worst_rtt_ms:.2f} ms | {_when(w.t_wall)} | |")
        loss = max(series, key=lambda f: f.worst_loss_pct or 0.0)
        out.append(f"| worst loss | {loss.worst_loss_pct or 0.0:.1f} % | {_when(loss.t_wall)} | |")
    else:
        out.append("| latency | not probed | | record with --ping HOST |")
    shown = [e for e in events if e.kind in EVENT_KINDS]
    out.append("\n## Changes and events\n")
    if not shown:
        out.append("None recorded.")
    else:
        out.append(f"Figures are averages over {WINDOW_S:g} s before and after (RTT: worst).\n")
        out.append("| when | kind | what | throughput before → after | top softirq | drops | RTT |")
        out.append("|---|---|---|---|---|---|---|")
        for e in shown:
            before = _summary(_window(series, e.t_wall - WINDOW_S, e.t_wall))
            after = _summary(_window(series, e.t_wall, e.t_wall + WINDOW_S))
            cells = [f"{_fmt(k, before[k])} → {_fmt(k, after[k])}" for k in ("throughput", "softirq", "drops", "rtt")]
            text = e.text.replace("|", "\\|")
            out.append(f"| {_when(e.t_wall)} | {e.kind} | {text} | " + " | ".join(cells) + " |")
    if plots and len(series) >= 10:
        plot = _plot(series)
        if plot:
            out.append("\n## Throughput\n")
            out.append("```\n" + plot + "\n```")
    return "\n".join(out) + "\n"


def _plot(series: list[Figures]) -> str | None:
    try:
        import plotext as plt  # type: ignore[import-untyped]
    except ImportError:
        return None
    t0 = series[0].t_wall
    xs = [(f.t_wall - t0) / 60 for f in series]
    plt.clear_figure()
    plt.plotsize(100, 20)
    plt.theme("clear")
    plt.plot(xs, [f.rx_bytes_s * 8 / 1e6 for f in series], label="rx Mbit/s")
    plt.plot(xs, [f.tx_bytes_s * 8 / 1e6 for f in series], label="tx Mbit/s")
    plt.xlabel(f"minutes after {_when(t0)}")
    text: Any = plt.build()
    plt.clear_figure()
    return str(text).rstrip()


def build(reader: Reader, plots: bool = True) -> str:
    series = [figures(s, r) for s, r in pairs(reader)]
    return render(reader.meta, series, reader.events(), reader.warnings, plots)


def report(path: str, plots: bool = True) -> int:
    reader = Reader(path)
    try:
        sys.stdout.write(build(reader, plots))
    finally:
        reader.close()
    return 0
