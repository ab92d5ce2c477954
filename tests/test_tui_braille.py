"""The braille line charts: where dots land, how lines join and break, and what a
redraw costs on screen (only changed rows, nothing for an equal frame)."""

from __future__ import annotations

import math
import random

import pytest
from textual.app import App, ComposeResult

from nettop.tui import braille
from nettop.tui.charts import LatencyChart, ThroughputChart
from nettop.tui.model import Series

# Unicode braille: bit of the dot at (column in cell, row in cell from the top)
DOT = {(0, 0): 0x01, (0, 1): 0x02, (0, 2): 0x04, (0, 3): 0x40,
       (1, 0): 0x08, (1, 1): 0x10, (1, 2): 0x20, (1, 3): 0x80}


def dots(rows: list[list[braille.Run]], label_w: int, plot_rows: range, role: str | None = None) -> set[tuple[int, int]]:
    """Decode the plot area back into (dot column, dot row from the bottom)."""
    out = set()
    n = len(plot_rows)
    for cy, r in enumerate(plot_rows):
        x = 0
        for text, rl in rows[r]:
            for ch in text:
                cx = x - label_w
                x += 1
                if cx < 0 or not 0x2800 <= ord(ch) <= 0x28FF or (role is not None and rl != role):
                    continue
                bits = ord(ch) - 0x2800
                for (side, ry), bit in DOT.items():
                    if bits & bit:
                        out.add((2 * cx + side, 4 * n - 1 - (4 * cy + ry)))
    return out


def text(rows: list[list[braille.Run]]) -> list[str]:
    return ["".join(t for t, _ in r) for r in rows]


def frame(*lines: braille.Line, top: float = 100.0, markers: tuple[float, ...] = (), x0: float = -60.0) -> braille.Frame:
    return braille.Frame(tuple(lines), x0, 0.0, top, markers, "bit/s", lambda v: f"{v:.0f}")


def test_nice_top_rounds_the_axis_up_to_a_readable_number():
    assert braille.nice_top(0) == 1.0 and braille.nice_top(0, floor=5.0) == 5.0
    assert braille.nice_top(100) == 100 and braille.nice_top(101) == 120
    assert braille.nice_top(2.37e9) == 2.5e9 and braille.nice_top(0.37) == pytest.approx(0.4)
    assert braille.nice_top(9.1) == 10 and braille.nice_top(float("nan")) == 1.0


def test_every_row_is_exactly_the_width_with_legend_labels_and_time_axis():
    rows = braille.chart_rows(frame(braille.Line("eth0 rx", (-60.0, 0.0), (0.0, 100.0))), 50, 10)
    lines = text(rows)
    assert len(lines) == 10 and all(len(s) == 50 for s in lines)
    assert lines[0].startswith("━━ eth0 rx") and lines[0].rstrip().endswith("bit/s")
    assert lines[1].startswith("100┤") and lines[8].startswith("  0┤")
    assert lines[-1].split() == ["-60s", "-45s", "-30s", "-15s", "now"]
    # small charts drop the legend, then the axis, never the plot
    assert len(braille.chart_rows(frame(), 30, 3)) == 3 and "now" in text(braille.chart_rows(frame(), 30, 3))[-1]
    assert braille.chart_rows(frame(), 0, 5) == []


def test_each_point_lands_on_its_dot_and_consecutive_points_are_joined():
    rng = random.Random(7)
    xs = tuple(float(x) for x in range(-60, 1))
    ys = tuple(rng.uniform(0, 100) for _ in xs)
    width, height = 70, 12
    rows = braille.chart_rows(frame(braille.Line("a", xs, ys)), width, height)
    label_w = 4  # "100" + the axis
    cols, plot = width - label_w, range(1, height - 1)
    got = dots(rows, label_w, plot)
    cols_d, rows_d = 2 * cols - 1, 4 * len(plot) - 1
    expect = {(int((x + 60) / 60 * cols_d + 0.5), int(y / 100 * rows_d + 0.5)) for x, y in zip(xs, ys)}
    assert expect <= got
    # joined: every dot column between the first and last point has at least one dot
    assert {dx for dx, _ in got} == set(range(0, cols_d + 1))


def reference_line(canvas: braille.Canvas, xs, ys, x0: float, x1: float, top: float,  # type: ignore[no-untyped-def]
                   series: int, dashed: bool = False) -> None:
    """What `Canvas.line` draws, one `span` per dot column a pair of points covers: each
    column from the previous column's height to its own; a break at a missing value or
    a gap of more than three usual steps."""
    cols_d, rows_d = 2 * canvas.cols - 1, 4 * canvas.rows - 1
    if x1 <= x0 or top <= 0 or not xs:
        return
    canvas.dashed = dashed
    sx, sy = cols_d / (x1 - x0), rows_d / top
    steps = sorted(b - a for a, b in zip(xs, xs[1:]) if b > a)
    gap = 3 * (steps[len(steps) // 2] if steps else 0.0) or math.inf
    start = max(0, sum(1 for x in xs if x < x0) - 1)
    prev = None
    for x, y in zip(xs[start:], ys[start:]):
        if x > x1:
            break
        if y is None or y != y:
            prev = None
            continue
        dx, dy = int((x - x0) * sx + 0.5), min(rows_d, max(0, int(y * sy + 0.5)))
        if prev is not None and x - prev[0] <= gap:
            ax, ay = prev[1], prev[2]
            if dx <= ax:
                if 0 <= dx <= cols_d:
                    canvas.span(dx, min(ay, dy), max(ay, dy), series)
            else:
                last = ay
                for c in range(ax + 1, dx + 1):
                    yc = ay + int((dy - ay) * (c - ax) / (dx - ax) + (0.5 if dy >= ay else -0.5))
                    if 0 <= c <= cols_d:
                        canvas.span(c, min(last, yc), max(last, yc), series)
                    last = yc
        elif 0 <= dx <= cols_d:
            canvas.span(dx, dy, dy, series)
        prev = (x, dx, dy)


def test_a_line_sets_the_dots_of_one_span_per_column_it_crosses():
    """`Canvas.line` gathers a column's dots before writing its cells (a 180 s window has
    more points than columns); the picture is the one of a span per column crossed:
    random series with breaks, gaps, points off both edges, dashed and overdrawn."""
    rng = random.Random(11)
    for _ in range(1500):
        n = rng.choice([1, 2, 5, 40, 200])
        x0, x1 = rng.choice([(-180.0, 0.0), (-60.0, 0.0), (0.0, 10.0)])
        step = rng.choice([0.1, 1.0, 5.0])
        if rng.random() < 0.3:
            xs = sorted(round(rng.uniform(x0 - 30, x1 + 10), 3) for _ in range(n))
        else:
            xs = [round(x1 - step * (n - i) + rng.uniform(-0.05, 0.05), 3) for i in range(n)]
        if n > 3 and rng.random() < 0.3:  # samples missing: a gap
            k = rng.randrange(1, n)
            xs = sorted(x - 50 if i < k else x for i, x in enumerate(xs))
        ys = [rng.choice([None, math.nan, 0.0, 0.0, rng.uniform(0, 1e3), rng.uniform(0, 1e9)]) for _ in xs]
        top = rng.choice([1.0, 1000.0, 1.2e9])
        cols, rows, dashed = rng.randint(1, 60), rng.randint(1, 16), rng.random() < 0.5
        got, want = braille.Canvas(cols, rows), braille.Canvas(cols, rows)
        for series, scale, dash in ((0, 1.0, False), (1, 0.5, dashed)):
            scaled = [None if y is None else y * scale for y in ys]
            got.line(xs, scaled, x0, x1, top, series, dash)
            reference_line(want, xs, scaled, x0, x1, top, series, dash)
        assert (got.bits, got.owner) == (want.bits, want.owner)


def test_a_step_is_drawn_as_an_unbroken_edge():
    rows = braille.chart_rows(frame(braille.Line("a", (-60.0, -30.0, -29.0, 0.0), (0.0, 0.0, 100.0, 100.0))), 40, 10)
    got = dots(rows, 4, range(1, 9))
    columns = {}
    for dx, dy in got:
        columns.setdefault(dx, set()).add(dy)
    assert any(ys == set(range(0, 32)) for ys in columns.values())  # one column spans bottom to top


def test_missing_samples_leave_a_gap_and_values_above_the_top_are_clipped():
    xs = tuple(float(x) for x in (-60, -59, -58, -57, -20, -19, -18))
    ys = (10.0, 10.0, 10.0, 10.0, 500.0, 500.0, float("nan"))
    rows = braille.chart_rows(frame(braille.Line("a", xs, ys)), 64, 10)
    got = dots(rows, 4, range(1, 9))
    cols_d = 2 * 60 - 1
    gap = range(int((-57 + 60) / 60 * cols_d + 0.5) + 1, int((-20 + 60) / 60 * cols_d + 0.5))
    assert gap and not any(dx in gap for dx, _ in got)
    assert max(dy for _, dy in got) == 31  # 500 on a 0-100 axis sits on the top row, not beyond
    assert not any(dx > int((-19 + 60) / 60 * cols_d + 0.5) for dx, _ in got)  # NaN draws nothing


def test_markers_are_vertical_lines_and_data_draws_over_them_in_the_later_series_colour():
    flat = braille.Line("a", (-60.0, 0.0), (50.0, 50.0))
    f = frame(flat, braille.Line("b", (-60.0, 0.0), (10.0, 10.0)), flat, markers=(-30.0, -999.0))
    rows = braille.chart_rows(f, 40, 10)
    plot = range(1, 9)
    marks = dots(rows, 4, plot, role="marker")
    # the cell holding the line shows the line; every other cell of the column the marker
    (data_dy,) = {dy for _, dy in dots(rows, 4, plot, role="s2")}
    covered = {dy for _, dy in marks}
    assert len(covered) == 24 and data_dy not in covered  # b's cell row shows b
    assert len({dx for dx, _ in marks}) == 1  # the marker off the window is not drawn
    assert not dots(rows, 4, plot, role="s0")  # the third line drew over the first, cell by cell


def test_a_dashed_line_leaves_every_third_cell_so_lines_of_one_colour_differ():
    f = frame(braille.Line("eth0 rx", (-60.0, 0.0), (80.0, 80.0), style=0),
              braille.Line("eth0 tx", (-60.0, 0.0), (20.0, 20.0), style=0, dashed=True))
    assert [r for r in braille.legend(f) if r[0] in ("━━", "╍╍")] == [("━━", "s0"), ("╍╍", "s0")]
    rows = braille.chart_rows(f, 64, 10)
    got = dots(rows, 4, range(1, 9), role="s0")
    solid = {dx // 2 for dx, dy in got if dy > 16}  # 80 of 100: dot row 25
    dashes = {dx // 2 for dx, dy in got if dy < 16}  # 20 of 100: dot row 6
    assert solid == set(range(60))
    assert dashes == {c for c in range(60) if c % 3 != 2}


class ChartApp(App[None]):
    CSS = "ThroughputChart, LatencyChart { height: 10; }"

    def compose(self) -> ComposeResult:
        yield ThroughputChart(id="t")
        yield LatencyChart(id="l")


async def test_charts_refresh_only_rows_that_changed_and_nothing_for_an_equal_frame():
    app = ChartApp()
    async with app.run_test(size=(80, 24)) as pilot:
        chart = app.query_one(ThroughputChart)
        xs = tuple(float(x) for x in range(-180, 1))
        flat = Series("veth0", xs, tuple(4e8 for _ in xs), tuple(1e8 for _ in xs))
        chart.show([flat], [], 180)
        await pilot.pause()
        lines = chart.text_lines()
        assert len(lines) == 10 and lines[0].startswith("━━ rx  ╍╍ tx  ━━ veth0  bit/s") and lines[1].startswith("500M┤")
        regions: list[object] = []
        original = chart.refresh

        def spy(*regions_: object, **kw: object) -> object:
            regions.extend(regions_ or ["all"])
            return original(*regions_, **kw)

        chart.refresh = spy  # type: ignore[method-assign]
        chart.show([flat], [], 180)
        assert regions == []  # equal picture: nothing sent
        spike = Series("veth0", xs, (*flat.rx_bits[:-1], 4.5e8), flat.tx_bits)  # same axis (500M)
        chart.show([spike], [], 180)
        assert regions and all(getattr(r, "height", 0) == 1 for r in regions) and len(regions) <= 2
        latency = app.query_one(LatencyChart)
        latency.show({"10.0.0.2": ([-2.0, -1.0, 0.0], [0.25, 0.31, 0.28])}, [-1.0], 180)
        await pilot.pause()
        lat = latency.text_lines()
        assert lat[0].startswith("━━ 10.0.0.2") and lat[0].rstrip().endswith("ms") and lat[1].startswith("0.4┤")
        assert math.isclose(latency.frame.top, 0.4)


async def test_each_plotted_interface_has_one_colour_and_the_narrow_legend_names_them_all():
    """Four busy interfaces in a half-width panel (the 80- and 120-column layouts): the
    legend must name all of them, which one entry per line (eight) could not."""
    app = ChartApp()
    async with app.run_test(size=(60, 24)) as pilot:
        chart = app.query_one(ThroughputChart)
        xs = tuple(float(x) for x in range(-180, 1))
        names = ["eth0", "ifb0", "ifb1", "veth0"]
        chart.show([Series(n, xs, tuple(1e8 * (k + 1) for _ in xs), tuple(5e7 * (k + 1) for _ in xs))
                    for k, n in enumerate(names)], [], 180)
        await pilot.pause()
        legend = chart.text_lines()[0]
        assert all(f"━━ {n} " in legend for n in names), legend
        roles = {line.label: line.role(k) for k, line in enumerate(chart.frame.lines)}
        assert [roles[f"{n} rx"] for n in names] == [roles[f"{n} tx"] for n in names]
        assert len({roles[f"{n} rx"] for n in names}) == 4
        assert [line.dashed for line in chart.frame.lines] == [False, True] * 4
