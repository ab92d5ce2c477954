"""Line charts in braille cells, as pure functions from series to rows of styled runs.

Each terminal cell holds a 2x4 grid of braille dots, so a chart W cells wide has 2W
columns of time and 4 rows of value per line of text. The live charts redraw every
second, so cost matters: plotext rebuilt its whole canvas per frame (30 ms for a
116x10 chart of 300 points, 110 ms at 156x16 with noisy traffic), while this draws
only the dots the lines touch: about a millisecond for the same picture.

Roles name what a run is ("axis", "marker", "s0".."s5" for the series, "" for blank);
the widget maps them to theme styles, so no colour is named here. A line may be
dashed, so lines of one colour stay apart (the throughput chart gives each interface
one colour and dashes its tx): in the mono theme, under NO_COLOR and for colour-blind
readers too.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Callable, Sequence

Run = tuple[str, str]  # (text, role)
SERIES_STYLES = 6  # series roles s0..s5, reused round-robin

# _RUN[side][a][b]: the dots of one cell's left (0) or right (1) column from dot row a to
# b inclusive, rows counted from the top of the cell (Unicode braille numbering).
_COLUMN = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
_RUN = tuple(tuple(tuple(sum(_COLUMN[side][r] for r in range(a, b + 1)) for b in range(4)) for a in range(4))
             for side in range(2))
# _GLYPH[side][m]: the braille bits of one cell's left (0) or right (1) column whose dot
# rows, counted from the bottom of the cell, are the set bits of the 4-bit m
_GLYPH = tuple(tuple(sum(_COLUMN[side][3 - j] for j in range(4) if m >> j & 1) for m in range(16))
               for side in range(2))
_NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


@dataclass(frozen=True, slots=True)
class Line:
    """One plotted series: values `ys` at times `xs` (ascending)."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    style: int | None = None  # colour role s<style % SERIES_STYLES>; None: the line's index
    dashed: bool = False  # every third cell column left out

    def role(self, index: int) -> str:
        return f"s{(index if self.style is None else self.style) % SERIES_STYLES}"


@dataclass(frozen=True, slots=True)
class Frame:
    """Everything a chart shows: equal frames draw equal pictures."""

    lines: tuple[Line, ...]
    x0: float  # time at the left edge
    x1: float  # time at the right edge
    top: float  # value of the top dot row (the bottom one is 0)
    markers: tuple[float, ...] = ()  # times drawn as vertical lines (events)
    unit: str = ""  # shown after the legend
    y_label: Callable[[float], str] = str  # axis label of a value
    key: tuple[Run, ...] | None = None  # the legend's entries; None: one per line


def nice_top(peak: float, floor: float = 1.0) -> float:
    """The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k) at or above
    `peak`, so the axis reads 2.5G rather than 2.37G; `floor` when there is nothing."""
    if not peak > 0 or math.isinf(peak):
        return floor
    scale = 10.0 ** math.floor(math.log10(peak))
    for m in _NICE:
        if m * scale >= peak * (1 - 1e-12):
            return m * scale
    return 10 * scale


def _median_step(xs: Sequence[float]) -> float:
    steps = sorted(b - a for a, b in zip(xs, xs[1:]) if b > a)
    return steps[len(steps) // 2] if steps else 0.0


class Canvas:
    """Dots of several series on a cols x rows cell grid; the last series to touch a
    cell gives it its colour (as on any line plot, later lines draw over earlier)."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.bits = [0] * (cols * rows)
        self.owner = [-1] * (cols * rows)
        self.marks = [0] * (cols * rows)
        self.dashed = False  # while True, every third cell column of a line is left out

    def span(self, dx: int, lo: int, hi: int, series: int) -> None:
        """Set dot column `dx` from dot row `lo` to `hi` (0 = bottom) for `series`."""
        if self.dashed and (dx >> 1) % 3 == 2:
            return
        rows, cols = self.rows, self.cols
        top_a, top_b = 4 * rows - 1 - hi, 4 * rows - 1 - lo  # rows from the top
        cx, side = dx >> 1, dx & 1
        run = _RUN[side]
        bits, owner = self.bits, self.owner
        for cy in range(top_a >> 2, (top_b >> 2) + 1):
            a = top_a - 4 * cy if cy == top_a >> 2 else 0
            b = top_b - 4 * cy if cy == top_b >> 2 else 3
            i = cy * cols + cx
            bits[i] |= run[a][b]
            owner[i] = series

    def line(self, xs: Sequence[float], ys: Sequence[float], x0: float, x1: float, top: float,
             series: int, dashed: bool = False) -> None:
        """Draw one series, joining consecutive points; a gap of more than three usual
        steps (samples missing, the probe stopped) is left open.

        A 180 s window holds more points than dot columns, and the chart redraws every
        second or two: the points' dots are first gathered as one bitmask of dot rows
        per dot column (bit 0 the bottom row), then each column is written into its
        cells once, instead of one `span` per point."""
        cols_d, rows_d = 2 * self.cols - 1, 4 * self.rows - 1
        if x1 <= x0 or top <= 0 or not xs:
            return
        self.dashed = dashed
        sx, sy = cols_d / (x1 - x0), rows_d / top
        gap = 3 * _median_step(xs) or math.inf
        start = max(0, bisect.bisect_left(xs, x0) - 1)  # one point left of the edge joins in
        masks = [0] * (cols_d + 1)
        px = 0.0
        pdx = pdy = -1  # the previous point's dot column and row; -1: none (start or a break)
        for x, y in zip(xs[start:], ys[start:]):
            if x > x1:
                break
            if y is None or y != y:  # no value (None or NaN): break the line
                pdy = -1
                continue
            dx = int((x - x0) * sx + 0.5)
            dy = int(y * sy + 0.5)
            if dy > rows_d:
                dy = rows_d
            elif dy < 0:
                dy = 0
            if pdy < 0 or x - px > gap:
                if 0 <= dx <= cols_d:
                    masks[dx] |= 1 << dy
            elif dx - pdx <= 1:  # the next dot column, the same one (or out of order): one run
                if 0 <= dx <= cols_d:
                    masks[dx] |= (2 << dy) - (1 << pdy) if pdy <= dy else (2 << pdy) - (1 << dy)
            else:  # each dot column from the previous column's height to its own
                width, rise = dx - pdx, dy - pdy
                half = 0.5 if rise >= 0 else -0.5
                first = pdx + 1 if pdx >= -1 else 0  # columns left of the chart are not drawn
                last = pdy if first == pdx + 1 else pdy + int(rise * (first - 1 - pdx) / width + half)
                for c in range(first, (dx if dx < cols_d else cols_d) + 1):
                    yc = pdy + int(rise * (c - pdx) / width + half)
                    masks[c] |= (2 << yc) - (1 << last) if last <= yc else (2 << last) - (1 << yc)
                    last = yc
            px, pdx, pdy = x, dx, dy
        self._put(masks, series)

    def _put(self, masks: list[int], series: int) -> None:
        """Write each dot column's bitmask (`line`) into its cells for `series`."""
        cols, rows, dashed = self.cols, self.rows, self.dashed
        bits, owner = self.bits, self.owner
        for dx, m in enumerate(masks):
            if not m:
                continue
            cx = dx >> 1
            if dashed and cx % 3 == 2:
                continue
            glyph = _GLYPH[dx & 1]
            i = (rows - 1) * cols + cx  # the bottom cell; bit 0 of m is its bottom dot row
            while m:
                chunk = m & 0xF
                if chunk:
                    bits[i] |= glyph[chunk]
                    owner[i] = series
                m >>= 4
                i -= cols

    def marker(self, dx: int) -> None:
        if not 0 <= dx < 2 * self.cols:
            return
        cx, mask = dx >> 1, _RUN[dx & 1][0][3]
        for cy in range(self.rows):
            self.marks[cy * self.cols + cx] |= mask

    def runs(self, cy: int) -> list[Run]:
        """Row `cy` as runs of equal role: data over markers over blank."""
        out: list[Run] = []
        text: list[str] = []
        role = ""
        base = cy * self.cols
        for i in range(base, base + self.cols):
            b = self.bits[i]
            if b:
                ch, r = chr(0x2800 | b), f"s{self.owner[i] % SERIES_STYLES}"
            elif self.marks[i]:
                ch, r = chr(0x2800 | self.marks[i]), "marker"
            else:
                ch, r = " ", ""
            if r != role and text:
                out.append(("".join(text), role))
                text = []
            role = r
            text.append(ch)
        if text:
            out.append(("".join(text), role))
        return out


def _fit(runs: list[Run], width: int) -> list[Run]:
    out, used = [], 0
    for text, role in runs:
        if used >= width:
            break
        text = text[: width - used]
        out.append((text, role))
        used += len(text)
    if used < width:
        out.append((" " * (width - used), ""))
    return out


def legend(frame: Frame) -> list[Run]:
    """The frame's own key, or each line's mark in its colour and its label; then the unit."""
    runs: list[Run] = []
    if frame.key is not None:
        runs += frame.key
    else:
        for n, line in enumerate(frame.lines):
            runs += [("╍╍" if line.dashed else "━━", line.role(n)), (f" {line.label}  ", "axis")]
    if frame.unit:
        runs.append((frame.unit, "axis"))
    return runs


def time_label(seconds_ago: float) -> str:
    if seconds_ago < 0.5:
        return "now"
    if seconds_ago >= 600 and seconds_ago % 60 == 0:
        return f"-{seconds_ago / 60:.0f}m"
    return f"-{seconds_ago:.0f}s"


def x_axis(frame: Frame, left: int, cols: int) -> list[Run]:
    """Tick labels at the quarters of the window: oldest flush left, 'now' flush right."""
    line = [" "] * (left + cols)
    used_to = -1
    for k in range(5):
        t = frame.x0 + (frame.x1 - frame.x0) * k / 4
        text = time_label(frame.x1 - t)
        at = left + round((cols - 1) * k / 4)
        start = at if k == 0 else (at - len(text) + 1 if k == 4 else at - len(text) // 2)
        start = max(left, min(start, left + cols - len(text)))
        if start <= used_to + 1:
            continue  # too narrow for this label
        line[start:start + len(text)] = text
        used_to = start + len(text) - 1
    return [("".join(line), "axis")]


def chart_rows(frame: Frame, width: int, height: int) -> list[list[Run]]:
    """The whole chart, `height` rows of runs exactly `width` cells wide: a legend on
    top (when there are 4 rows or more), the plot with value labels on its left, and
    the time axis below (3 rows or more)."""
    if width <= 0 or height <= 0:
        return []
    has_legend, has_axis = height >= 4, height >= 3
    rows = height - has_legend - has_axis
    labels = {0: frame.y_label(frame.top), rows - 1: "0"}
    dots = 4 * rows - 1
    if rows >= 5:
        labels.setdefault((dots - dots // 2) // 4, frame.y_label(frame.top / 2))
    label_w = max(len(t) for t in labels.values()) + 1
    cols = max(1, width - label_w)
    canvas = Canvas(cols, rows)
    for x in frame.markers:
        if frame.x0 <= x <= frame.x1:
            canvas.marker(int((x - frame.x0) / (frame.x1 - frame.x0) * (2 * cols - 1) + 0.5))
    for n, line in enumerate(frame.lines):
        canvas.line(line.xs, line.ys, frame.x0, frame.x1, frame.top,
                    n if line.style is None else line.style, line.dashed)
    out: list[list[Run]] = []
    if has_legend:
        out.append(_fit(legend(frame), width))
    for cy in range(rows):
        tick = labels.get(cy)
        axis = (tick.rjust(label_w - 1) + "┤") if tick is not None else " " * (label_w - 1) + "│"
        out.append(_fit([(axis, "axis"), *canvas.runs(cy)], width))
    if has_axis:
        out.append(_fit(x_axis(frame, label_w, cols), width))
    return out
