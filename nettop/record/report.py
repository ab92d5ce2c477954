"""`nettop report FILE`: a Markdown summary to paste into an incident ticket.

Peaks of throughput, softirq load, drops and latency, then every tuning change, mark or
problem with the figures of the minute before and the minute after it, and a text plot
of throughput where there is more than a handful of samples. All figures are the same
rates the live screen showed (see export.py).
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from nettop.output.before_after import WINDOW_S, Figures, figures, format_value, summary, window
from nettop.record.export import pairs
from nettop.record.series import Recording, open_recording
from nettop.model.timeline import Event

EVENT_KINDS = ("tuning", "mark", "problem", "appeared", "vanished")


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _rate(v: float) -> str:
    return format_value("throughput", v)


def render(meta: dict[str, str], series: list[Figures], events: list[Event], warnings: list[str],
           plots: bool = True, at: list[float] | None = None, stepped_s: float = 0.0) -> str:
    """`at`: the monotonic time of each event's sample (Recordings.placed_events), so the
    minute before and after an event is found on the clock that never steps; without it
    the events' wall times are used. `stepped_s`: what the wall clock's steps added up to,
    left out of the span."""
    out: list[str] = []
    host = meta.get("host", "?")
    out.append(f"# nettop recording: {host}\n")
    if not series:
        out.append("No two intact samples: nothing to report.\n")
        out += [f"> {w}\n" for w in warnings]
        return "\n".join(out)
    span = series[-1].t_wall - series[0].t_wall - stepped_s
    if meta.get("captured") == "1":  # `nettop record --root ARCHIVE`: boot and capture, not a series
        out.append(f"- kernel {meta.get('kernel', '?')}, a captured host (not live), captured "
                   f"{_when(series[-1].t_wall)}: {meta.get('capture_note', 'figures between its two points')}")
    else:
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
        monos = dict(zip(map(id, events), at)) if at is not None and len(at) == len(events) else {}
        for e in shown:
            m = monos.get(id(e))
            if m is None:
                before = summary(window(series, e.t_wall - WINDOW_S, e.t_wall))
                after = summary(window(series, e.t_wall, e.t_wall + WINDOW_S))
            else:
                before = summary([f for f in series if m - WINDOW_S <= f.t_mono < m])
                after = summary([f for f in series if m <= f.t_mono < m + WINDOW_S])
            cells = [f"{format_value(k, before[k])} → {format_value(k, after[k])}"
                     for k in ("throughput", "softirq", "drops", "rtt")]
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
        import plotext as plt
    except ImportError:
        return None
    t0 = series[0].t_wall
    xs = [(f.t_wall - t0) / 60 for f in series]
    plt.clear_figure()
    plt.plotsize(100, 20)
    plt.theme("clear")
    plt.plot(xs, [f.rx_bytes_s * 8 / 1e6 for f in series], label="rx Mbit/s")
    # a ticket has no colour: tx gets its own mark so the two lines stay apart
    plt.plot(xs, [f.tx_bytes_s * 8 / 1e6 for f in series], label="tx Mbit/s", marker=".")
    plt.xlabel(f"minutes after {_when(t0)}")
    text: Any = plt.build()
    plt.clear_figure()
    # even the "clear" theme ends lines with a colour reset, which a ticket shows as "[0m"
    return str(plt.uncolorize(text)).rstrip()


def build(reader: Recording, plots: bool = True) -> str:
    from nettop.doctor.report import Tail
    tail = Tail()  # keeps the last samples for the doctor's section
    series = [figures(s, r) for s, r in tail.feed(pairs(reader))]
    from nettop.doctor import DoctorConfig
    config = DoctorConfig.from_meta(reader.meta)  # the target the recorded findings were judged by
    if reader.meta.get("captured") == "1" and len(tail.points) == 1:
        import dataclasses

        from nettop.model.timeline import Point
        # a capture's two points are its whole window (since boot, or between its captures)
        first = next(iter(reader.snapshots()))
        tail.points.appendleft(Point(first, None))
        config = dataclasses.replace(
            config, window_s=tail.points[-1].snapshot.t_mono - first.t_mono + 1.0)
    events, at, stepped = reader.events(), None, 0.0
    placed = getattr(reader, "placed_events", None)  # a `record --dir` series (or one file read as one)
    if placed is not None:
        pairs_ = placed()
        events = [e for _, e in pairs_]
        at = [reader.index[pos].t_mono for pos, _ in pairs_]
        stepped = sum(st.seconds for st in getattr(reader, "clock_steps", []))
    out = render(reader.meta, series, events, reader.warnings, plots, at, stepped) + tail.markdown(events, config)
    if reader.meta.get("experiment"):
        from nettop.experiment.table import from_events, markdown
        rows = from_events([e.text for e in reader.events() if e.kind == "experiment"])
        if rows:
            out += f"\n## Experiment: {reader.meta['experiment']}\n\n{markdown(rows)}"
    return out


def report(path: str, plots: bool = True, since: float | None = None, until: float | None = None) -> int:
    """`nettop report FILE|DIR [--since T] [--until T]`."""
    reader = open_recording(path, since, until)
    try:
        sys.stdout.write(build(reader, plots))
    finally:
        reader.close()
    return 0
