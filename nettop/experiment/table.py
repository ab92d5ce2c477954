"""The results table: one row per variant, median and min–max over the repeats, change vs baseline.

Failed phases (the dead-man switch) are counted and left out of the figures. The same
table comes out as Markdown (for a ticket or docs), CSV (one row per variant and
figure, for a spreadsheet) and plotext bar charts of loaded RTT and throughput.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from nettop.experiment.measure import Phase

# (field, heading, format, compared with the baseline)
FIGURES: tuple[tuple[str, str, Callable[[float], str], bool], ...] = (
    ("tput_bps", "throughput", lambda v: _bits(v), True),
    ("iperf_bps", "iperf3", lambda v: _bits(v), False),
    ("rtt_idle_p50", "RTT idle p50 ms", lambda v: f"{v:.2f}", False),
    ("rtt_load_p50", "RTT load p50 ms", lambda v: f"{v:.2f}", False),
    ("rtt_load_p99", "RTT load p99 ms", lambda v: f"{v:.2f}", True),
    ("loss_load_pct", "loss %", lambda v: f"{v:.1f}", False),
    ("softirq_pct", "softirq %", lambda v: f"{v:.1f}", False),
    ("hardirq_pct", "hardirq %", lambda v: f"{v:.1f}", False),
    ("irq_per_s", "irq/s", lambda v: f"{v:,.0f}", False),
    ("drops_per_s", "drops/s", lambda v: f"{v:,.1f}", False),
    ("time_squeeze_per_s", "squeeze/s", lambda v: f"{v:,.1f}", False),
    ("retransmits", "retrans", lambda v: f"{v:,.0f}", False),
)


def _bits(v: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.0f}"


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Row:
    variant: str
    runs: int
    failed: int
    figures: dict[str, Spread | None]
    failures: tuple[str, ...] = ()


def summarize(phases: Sequence[Phase]) -> list[Row]:
    names: list[str] = []
    for ph in phases:
        if ph.variant not in names:
            names.append(ph.variant)
    if "baseline" in names:
        names.remove("baseline")
        names.insert(0, "baseline")
    rows = []
    for name in names:
        mine = [ph for ph in phases if ph.variant == name]
        ok = [ph for ph in mine if ph.failed is None]
        figs: dict[str, Spread | None] = {}
        for key, *_ in FIGURES:
            vals = [float(v) for ph in ok if (v := getattr(ph, key)) is not None]
            figs[key] = Spread(statistics.median(vals), min(vals), max(vals), len(vals)) if vals else None
        rows.append(Row(name, len(mine), len(mine) - len(ok), figs,
                        tuple(sorted({ph.failed for ph in mine if ph.failed}))))
    return rows


def _cell(s: Spread | None, fmt: Callable[[float], str]) -> str:
    if s is None:
        return "–"
    if s.n == 1 or s.low == s.high:
        return fmt(s.median)
    return f"{fmt(s.median)} ({fmt(s.low)}–{fmt(s.high)})"


def _delta(s: Spread | None, base: Spread | None) -> str:
    if s is None or base is None or base.median == 0:
        return ""
    return f" {100 * (s.median - base.median) / base.median:+.0f}%"


def markdown(rows: Sequence[Row]) -> str:
    keys = [f for f in FIGURES if any(r.figures.get(f[0]) for r in rows)]
    head = ["variant", "runs"] + [h for _, h, _, _ in keys]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = next((r for r in rows if r.variant == "baseline"), None)
    for r in rows:
        cells = [r.variant, f"{r.runs - r.failed}/{r.runs}"]
        for key, _, fmt, compare in keys:
            c = _cell(r.figures.get(key), fmt)
            if compare and base is not None and r is not base:
                c += _delta(r.figures.get(key), base.figures.get(key))
            cells.append(c)
        out.append("| " + " | ".join(cells) + " |")
    notes = [f"- {r.variant}: {r.failed} run(s) failed: {'; '.join(r.failures)}" for r in rows if r.failed]
    out.append("")
    out.append("Median (min–max) over the repeats that completed; throughput and RTT p99 with the change vs baseline.")
    return "\n".join(out + notes) + "\n"


def csv_text(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["variant", "figure", "median", "min", "max", "repeats", "failed"])
    for r in rows:
        for key, *_ in FIGURES:
            s = r.figures.get(key)
            if s is not None:
                w.writerow([r.variant, key, f"{s.median:.6g}", f"{s.low:.6g}", f"{s.high:.6g}", s.n, r.failed])
    return buf.getvalue()


def charts(rows: Sequence[Row], width: int = 80) -> str:
    """Bar charts of loaded RTT p99 and throughput per variant (plotext, text only)."""
    import plotext as plt  # type: ignore[import-untyped]

    out = []
    for key, title, scale in (("rtt_load_p99", "RTT under load, p99 (ms)", 1.0),
                              ("tput_bps", "throughput (Mbit/s)", 1e-6)):
        names = [r.variant for r in rows if r.figures.get(key)]
        vals = [r.figures[key].median * scale for r in rows if r.figures.get(key)]  # type: ignore[union-attr]
        if not vals:
            continue
        plt.clear_figure()
        plt.theme("clear")  # no colour codes: the text goes into files and tickets
        plt.simple_bar(names, vals, width=width, title=title)
        out.append(str(plt.uncolorize(plt.build())).rstrip())
        plt.clear_figure()
    return "\n".join(out)


def from_events(texts: Sequence[str]) -> list[Row]:
    """The table of a recording, from its `result {...}` events."""
    phases = [p for t in texts if (p := Phase.from_event_text(t)) is not None]
    return summarize(phases)
