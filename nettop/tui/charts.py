"""The throughput and latency charts, the CPU heatmap, and their empty states.

Charts are redrawn only when a new point arrives (`show`), never on a timer; event
markers from the timeline are drawn as vertical lines at the moment they happened.
Colours come from the Textual theme (textual-plotext derives the plot theme from it,
the heatmap levels are component classes styled in the app's .tcss).
"""

from __future__ import annotations

from typing import ClassVar, Mapping, Sequence

from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual_plotext import PlotextPlot

from nettop.tui import format as fmt
from nettop.tui.model import CpuRow, Series

_UNITS = ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"), (1.0, "bit/s"))


def bit_unit(peak: float) -> tuple[float, str]:
    for div, name in _UNITS:
        if peak >= div:
            return div, name
    return 1.0, "bit/s"


class LineChart(PlotextPlot):
    """A plotext chart drawn with the line API: the figure is built once per new point (not
    per repaint) and only the screen lines that differ from the previous figure are redrawn."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._lines: list[Strip] = []

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, self._on_theme)

    def _on_theme(self, theme) -> None:  # type: ignore[no-untyped-def]
        self._register_theme(theme.name)
        self.rebuild(full=True)

    def on_resize(self) -> None:
        self.rebuild(full=True)

    def rebuild(self, full: bool = False) -> None:
        width, height = self.size
        if width <= 0 or height <= 0:
            return
        plot = self._plot
        plot.plotsize(width, height)
        plot._set_size(width, height)
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        console = self.app.console
        base = self.rich_style
        text = Text.from_ansi(plot.build())
        new = [Strip(list(line.render(console))).crop_extend(0, width, base)
               for line in text.split("\n", allow_blank=True)[:height]]
        old, self._lines = self._lines, new
        if full or len(old) != len(new):
            self.refresh()
            return
        for y, (a, b) in enumerate(zip(old, new)):
            if list(a) != list(b):
                self.refresh(Region(0, y, width, 1))

    def render_line(self, y: int) -> Strip:
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.size.width, self.rich_style)


def due(last: float | None, now: float, window_s: float, width: int) -> bool:
    """Whether a chart `width` cells wide (two braille dots each) showing `window_s`
    seconds has moved by at least one dot since it was drawn at `last`."""
    if last is None or now < last:
        return True
    return now - last >= window_s / max(1, 2 * width)


def picture_key(series: Sequence[Series], markers: Sequence[float], window_s: float, width: int,
                height: int, div: float, peak: float) -> tuple:
    """What a throughput chart would look like, at (finer than) its braille resolution:
    equal keys draw equal pictures, so an unchanged key needs no new plot."""
    cols, rows = max(1, 2 * width), max(1, 4 * height)
    top = max(1.0, peak / div * 1.1)
    lines = []
    for s in series:
        for values in (s.rx_bits, s.tx_bits):
            dots: list[tuple[int, int]] = []
            for x, v in zip(s.xs, values):
                dot = (int((x + window_s) / window_s * cols), int(v / div / top * rows))
                if not dots or dots[-1] != dot:
                    dots.append(dot)
            lines.append((s.ifname, tuple(dots)))
    return (width, height, f"{top:.4g}", div, tuple(lines),
            tuple(int((m + window_s) / window_s * cols) for m in markers))


class ThroughputChart(LineChart):
    """rx/tx bits per second per shown interface over the window, with event markers."""

    _picture: tuple | None = None

    def show(self, series: Sequence[Series], markers: Sequence[float], window_s: float) -> None:
        peak = max([0.0, *(v for s in series for v in (*s.rx_bits, *s.tx_bits))])
        div, unit = bit_unit(peak)
        picture = picture_key(series, markers, window_s, self.size.width, self.size.height, div, peak)
        if picture == self._picture:
            return  # same dots, labels and markers as on screen: skip plotext entirely
        self._picture = picture
        plt = self.plt
        plt.clear_figure()
        for s in series:
            if not s.xs:
                continue
            plt.plot(list(s.xs), [v / div for v in s.rx_bits], label=f"{s.ifname} rx", marker="braille")
            plt.plot(list(s.xs), [v / div for v in s.tx_bits], label=f"{s.ifname} tx", marker="braille")
        for x in markers:
            plt.vline(x)
        plt.xlim(-window_s, 0)
        plt.ylim(0, max(1.0, peak / div * 1.1))
        plt.ylabel(unit)
        plt.xlabel("seconds ago")
        self.rebuild()


class LatencyChart(LineChart, can_focus=True):
    """Round-trip time per target (ms) with event markers."""

    def show(self, series: Mapping[str, tuple[list[float], list[float]]], markers: Sequence[float],
             window_s: float) -> None:
        plt = self.plt
        plt.clear_figure()
        peak = 0.0
        for target, (xs, ys) in sorted(series.items()):
            plt.plot(xs, ys, label=target, marker="braille")
            peak = max([peak, *ys])
        for x in markers:
            plt.vline(x)
        plt.xlim(-window_s, 0)
        plt.ylim(0, peak * 1.2 if peak > 0 else 1.0)  # sub-millisecond RTTs keep their shape
        plt.ylabel("ms")
        self.rebuild()


class CpuHeatmap(Widget, can_focus=True):
    """Every CPU as one small cell (id and softirq %), shaded by load: for hosts with many CPUs."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"heat--0", "heat--1", "heat--2", "heat--3", "heat--label"}
    CELL = 9

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._rows: list[CpuRow] = []
        self._caption = ""

    def show(self, rows: Sequence[CpuRow], caption: str) -> None:
        new = list(rows)
        if new != self._rows or caption != self._caption:
            self._rows, self._caption = new, caption
            self.refresh()

    @staticmethod
    def level(row: CpuRow) -> int:
        if row.dropped_per_s:
            return 3
        s = row.softirq_pct or 0.0
        if s >= 50 or (row.squeeze_per_s or 0) >= 100:
            return 3
        if s >= 20:
            return 2
        if s >= 5:
            return 1
        return 0

    def render(self) -> Text:
        width = max(self.CELL, self.size.width)
        per_line = max(1, width // self.CELL)
        out = Text(no_wrap=True, end="")
        out.append(self._caption + "\n", style=self.get_component_rich_style("heat--label", partial=True))
        for n, row in enumerate(self._rows):
            if n and n % per_line == 0:
                out.append("\n")
            cell = f"{row.cpu:>4}{fmt.pct(row.softirq_pct)[:-2] if row.softirq_pct is not None else '-':>4}".ljust(
                self.CELL - 1)
            out.append(cell, style=self.get_component_rich_style(f"heat--{self.level(row)}", partial=True))
            out.append(" ")
        return out
