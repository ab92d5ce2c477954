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
    import plotext as plt

    out = []
    for key, title, scale in (("rtt_load_p99", "RTT under load, p99 (ms)", 1.0),
                              ("tput_bps", "throughput (Mbit/s)", 1e-6)):
        shown = [(r.variant, s.median * scale) for r in rows if (s := r.figures.get(key))]
        names = [name for name, _ in shown]
        vals = [v for _, v in shown]
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


def _change(s: Spread | None, base: Spread | None) -> str:
    """The change vs baseline in a short cell: +25%, -97%, or ×2142 past +999 %."""
    if s is None or base is None or base.median == 0:
        return ""
    pct = 100 * (s.median - base.median) / base.median
    if pct > 999:
        return f"×{s.median / base.median:.0f}"
    return f"{pct:+.0f}%"


# (heading, width, cell of a row given the baseline row); the first ones always show
_SCREEN_COLUMNS: tuple[tuple[str, int, Callable[[Row, Row | None], str]], ...] = (
    ("runs", 4, lambda r, b: f"{r.runs - r.failed}/{r.runs}"),
    ("tput", 7, lambda r, b: _med(r, "tput_bps", _bits)),
    ("Δ", 6, lambda r, b: "" if b is None or r is b else _change(r.figures.get("tput_bps"), b.figures.get("tput_bps"))),
    ("p50 ms", 8, lambda r, b: _med(r, "rtt_load_p50", lambda v: f"{v:.2f}")),
    ("p99 ms", 8, lambda r, b: _med(r, "rtt_load_p99", lambda v: f"{v:.2f}")),
    ("Δ", 6, lambda r, b: "" if b is None or r is b else _change(r.figures.get("rtt_load_p99"),
                                                               b.figures.get("rtt_load_p99"))),
    ("loss%", 5, lambda r, b: _med(r, "loss_load_pct", lambda v: f"{v:.1f}")),
    ("drops/s", 8, lambda r, b: _med(r, "drops_per_s", lambda v: f"{v:,.0f}")),
    ("sirq%", 6, lambda r, b: _med(r, "softirq_pct", lambda v: f"{v:.0f}")),
    ("retrans", 8, lambda r, b: _med(r, "retransmits", lambda v: f"{v:,.0f}")),
)


def _med(r: Row, key: str, fmt: Callable[[float], str]) -> str:
    s = r.figures.get(key)
    return "–" if s is None else fmt(s.median)


def screen_table(rows: Sequence[Row], width: int = 78) -> str:
    """The table for a terminal `width` columns wide: medians only, one line per variant,
    as many columns as fit (the Markdown table has every figure with its spread).
    RTT is under load; Δ is the change vs the baseline."""
    name_w = min(18, max([len("variant")] + [len(r.variant) for r in rows]))
    cols, used = [], name_w
    for i, col in enumerate(_SCREEN_COLUMNS):
        if i >= 6 and used + 1 + col[1] > width:
            break
        cols.append(col)
        used += 1 + col[1]
    base = next((r for r in rows if r.variant == "baseline"), None)
    lines = [f"{'variant':<{name_w}}" + "".join(f" {h:>{w}}" for h, w, _ in cols)]
    for r in rows:
        name = r.variant if len(r.variant) <= name_w else r.variant[: name_w - 1] + "…"
        lines.append(f"{name:<{name_w}}" + "".join(f" {cell(r, base)[:w]:>{w}}" for _, w, cell in cols))
    lines += [f"{r.variant}: {r.failed} run(s) failed: {'; '.join(r.failures)}" for r in rows if r.failed]
    lines.append("medians over the repeats; RTT under load; Δ vs baseline")
    return "\n".join(lines)
