"""The throughput and latency charts, the CPU heatmap, and their empty states.

Charts are redrawn only when a new point arrives (`show`), never on a timer, and only
the screen lines that differ from the last picture are sent; event markers from the
timeline are drawn as vertical lines at the moment they happened. The lines are drawn
in braille by `nettop.tui.braille` (plotext, which the Markdown report still uses,
cost 30-110 ms per frame here). Colours are component classes styled in the app's
.tcss with theme variables; Python never names a colour.
"""

from __future__ import annotations

from typing import ClassVar, Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from nettop.tui import braille
from nettop.tui import format as fmt
from nettop.tui import numa
from nettop.tui.model import CpuRow, Series, heat_level
from nettop.tui.widgets import KeptLines


class BrailleChart(KeptLines, Widget):
    """A line chart drawn with the line API from a `braille.Frame`: redrawing an equal
    frame costs nothing, and a new one refreshes only the rows that changed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"chart--axis", "chart--marker",
                                             *(f"chart--s{n}" for n in range(braille.SERIES_STYLES))}
    DEFAULT_CSS = """
    BrailleChart { width: 1fr; height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.frame: braille.Frame | None = None
        self._lines: list[Strip] = []
        self._styles: dict[str, Style] = {}
        self._drawn: tuple | None = None  # (frame, size) of the picture on screen

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._on_theme)

    def _on_theme(self, _theme: object) -> None:
        self._styles.clear()
        self._paint(full=True)

    def on_resize(self) -> None:
        self._paint(full=True)

    def draw(self, frame: braille.Frame) -> None:
        self.frame = frame
        self._paint()

    def _style(self, role: str) -> Style:
        style = self._styles.get(role)
        if style is None:
            base = self.rich_style
            style = base if not role else base + self.get_component_rich_style(f"chart--{role}", partial=True)
            self._styles[role] = style
        return style

    def _paint(self, full: bool = False) -> None:
        width, height = self.size
        if self.frame is None or width <= 0 or height <= 0:
            return
        drawn = (self.frame, width, height)
        if drawn == self._drawn and not full:
            return
        self._drawn = drawn
        new = [Strip([Segment(text, self._style(role)) for text, role in runs], width)
               for runs in braille.chart_rows(self.frame, width, height)]
        old, self._lines = self._lines, new
        if full or len(old) != len(new):
            self.refresh()
            return
        for y, (a, b) in enumerate(zip(old, new)):
            if a.text != b.text or list(a) != list(b):
                self.refresh(Region(0, y, width, 1))

    def text_lines(self) -> list[str]:
        """The chart as plain text (what tests and the tmux check read)."""
        return [strip.text for strip in self._lines]

    def render_line(self, y: int) -> Strip:
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.size.width, self.rich_style)


HEADROOM = 1.1  # a steady line sits below the top edge, where it reads as steady


def due(last: float | None, now: float, window_s: float, width: int) -> bool:
    """Whether a chart `width` cells wide (two braille dots each) showing `window_s`
    seconds has moved by at least one dot since it was drawn at `last`."""
    if last is None or now < last:
        return True
    return now - last >= window_s / max(1, 2 * width)


def _bits_label(v: float) -> str:
    """Axis values are round (nice_top): 500M, 1.2G, 2.5G; no '.0'."""
    if v < 1000:
        return f"{v:.3g}"  # 0.5 on an idle link's 0-1 axis, not "0"
    text = fmt.si(v)
    return text.replace(".0", "") if text[-1:].isalpha() else text


def _ms_label(v: float) -> str:
    return f"{v:.3g}"


class ThroughputChart(BrailleChart):
    """rx/tx bits per second per shown interface over the window, with event markers."""

    def show(self, series: Sequence[Series], markers: Sequence[float], window_s: float) -> None:
        """One colour per interface, rx solid and tx dashed: the legend then names every
        plotted interface in a narrow panel, and four interfaces never share a colour."""
        lines: list[braille.Line] = []
        key: list[braille.Run] = [("━━", "axis"), (" rx  ", "axis"), ("╍╍", "axis"), (" tx  ", "axis")]
        peak = 0.0
        for k, s in enumerate(series):
            if not s.xs:
                continue
            lines.append(braille.Line(f"{s.ifname} rx", s.xs, s.rx_bits, style=k))
            lines.append(braille.Line(f"{s.ifname} tx", s.xs, s.tx_bits, style=k, dashed=True))
            key += [("━━", lines[-1].role(k)), (f" {s.ifname}  ", "axis")]
            peak = max(peak, max(s.rx_bits, default=0.0), max(s.tx_bits, default=0.0))
        self.draw(braille.Frame(tuple(lines), -window_s, 0.0, braille.nice_top(peak * HEADROOM), tuple(markers),
                                "bit/s", _bits_label, tuple(key)))


class LatencyChart(BrailleChart, can_focus=True):
    """Round-trip time per target (ms) with event markers."""

    def show(self, series: Mapping[str, tuple[list[float], list[float]]], markers: Sequence[float],
             window_s: float) -> None:
        lines = tuple(braille.Line(target, tuple(xs), tuple(ys)) for target, (xs, ys) in sorted(series.items()))
        peak = max((y for line in lines for y in line.ys), default=0.0)
        # sub-millisecond RTTs keep their shape: the top follows the peak down to 0.001 ms
        self.draw(braille.Frame(lines, -window_s, 0.0, braille.nice_top(peak * HEADROOM, 1.0), tuple(markers), "ms",
                                _ms_label))


class CpuHeatmap(Widget, can_focus=True):
    """Every CPU as one small cell (id and softirq %), shaded by load: for hosts with many
    CPUs. Above `numa.NODE_VIEW_ABOVE_CPUS` one line per NUMA node instead, each cell the
    highest of a run of CPUs (`numa.heatmap_lines`), laid out for the widget's width."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"heat--0", "heat--1", "heat--2", "heat--3", "heat--label"}
    CELL = 9
    ROLES: ClassVar[dict[str, str]] = {"muted": "heat--label", **{f"heat-{n}": f"heat--{n}" for n in range(4)}}

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._cells: list[tuple[str, int]] = []  # (text, heat level) of each CPU, as drawn
        self._caption = ""
        self._styles: dict[str, Style] = {}
        self._numa_rows: tuple[Sequence[CpuRow], Mapping[int, int]] | None = None  # the node view's input
        self._numa_lines: list[numa.Line] = []  # the node view as drawn
        self._numa_width = 0

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._styles.clear())

    def show(self, rows: Sequence[CpuRow], caption: str, cpu_nodes: Mapping[int, int] | None = None) -> None:
        """Repaint only when a shown cell changed: the other per-CPU rates move every tick."""
        if numa.node_view(rows):
            self._numa_rows = (rows, cpu_nodes or {})
            lines = self._node_lines(caption)
            if lines != self._numa_lines:
                self._numa_lines = lines
                self.refresh()
            return
        self._numa_rows, self._numa_lines = None, []
        cells = [(f"{r.cpu:>4}{fmt.pct(r.softirq_pct)[:-2] if r.softirq_pct is not None else '-':>4}"
                  .ljust(self.CELL - 1), heat_level(r)) for r in rows]
        if cells != self._cells or caption != self._caption:
            self._cells, self._caption = cells, caption
            self.refresh()

    def _node_lines(self, caption: str) -> list[numa.Line]:
        assert self._numa_rows is not None
        self._caption, self._numa_width = caption, self.content_size.width
        return numa.heatmap_lines(self._numa_rows[0], self._numa_rows[1], max(20, self._numa_width), caption)

    def on_resize(self) -> None:
        if self._numa_rows is not None and self.content_size.width != self._numa_width:
            self._numa_lines = self._node_lines(self._caption)
            self.refresh()

    level = staticmethod(heat_level)

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(name, partial=True)
        return style

    def render(self) -> Text:
        if self._numa_rows is not None:
            out = Text(no_wrap=True, end="")
            for n, line in enumerate(self._numa_lines):
                if n:
                    out.append("\n")
                for text, role in line:
                    out.append(text, style=self._style(self.ROLES[role]) if role in self.ROLES else "")
            return out
        width = max(self.CELL, self.size.width)
        per_line = max(1, width // self.CELL)
        out = Text(no_wrap=True, end="")
        out.append(self._caption + "\n", style=self._style("heat--label"))
        for n, (cell, level) in enumerate(self._cells):
            if n and n % per_line == 0:
                out.append("\n")
            out.append(cell, style=self._style(f"heat--{level}"))
            out.append(" ")
        return out
