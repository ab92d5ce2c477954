"""Tables that are updated in place: one row per key, only changed cells rewritten.

Each table keeps the text and heat level of every cell it shows; a new tick compares
row by row and calls `update_cell` only where the text or level changed, so a quiet
host costs almost nothing to redraw. Heat levels are component classes styled in the
app's .tcss with theme variables; Python never names a colour.
"""

from __future__ import annotations

import operator
from itertools import compress
from typing import Any, Callable, ClassVar, Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from nettop.tui import format as fmt
from nettop.tui.model import LABEL_CAP, BqlRow, CpuRow, LatencyRow, QdiscRow, QueueRef, QueueRow
from nettop.tui.widgets import KeptLines

Cell = tuple[str, str]  # (text, level) where level is "", "warm", "hot" or "muted"
LEVELS = ("warm", "hot", "muted")
PAD = 1  # blank columns either side of every cell


class LiveTable(KeptLines, ScrollView, can_focus=True):
    """A keyed table drawn with Textual's line API: each row is one cached Strip, and a
    changed cell refreshes only its own screen region, so the terminal receives only the
    characters that changed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"livetable--header", "livetable--cursor",
                                             *(f"cell--{lv}" for lv in LEVELS)}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", show=False), Binding("down", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("home", "cursor(-1000000)", show=False), Binding("end", "cursor(1000000)", show=False),
    ]
    COLUMNS: ClassVar[tuple[tuple[str, str, int], ...]] = ()  # (key, label, width)
    LEFT: ClassVar[frozenset[str]] = frozenset()  # left-justified columns (others are numbers)

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._keys: list[str] = []
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._strips: dict[str, Strip] = {}  # each row's full-width strip
        self._final: dict[str, tuple[tuple[int, int, int, bool], Strip]] = {}  # as last drawn on screen
        # off-screen rows, their cells made on view: (key -> row, make(row), rows made)
        self._later: tuple[dict[str, int], Callable[[int], tuple[Cell, ...]], set[int]] | None = None
        self._header: Strip | None = None
        self._styles: dict[str, Style] = {}
        self._widths = {k: w for k, _, w in self.COLUMNS}
        self._columns = [k for k, _, _ in self.COLUMNS]
        self._x = self._offsets()
        self.cursor = 0
        self.cell_updates = 0  # cells rewritten since mount: tests check quiet ticks cost nothing

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.restyle())
        self._resize_virtual()

    # --- geometry ------------------------------------------------------------------------

    def _offsets(self) -> dict[str, int]:
        x, out = 0, {}
        for key in self._columns:
            out[key] = x
            x += self._widths[key] + 2 * PAD
        out[""] = x  # total width
        return out

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(self._x[""], len(self._keys) + 1)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._keys) + 1

    # --- styles ----------------------------------------------------------------------------

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            if name == "__base__":  # the widget's own colours: computed once per theme
                style = self.rich_style
            else:
                style = self.get_component_rich_style(name, partial=True)
            self._styles[name] = style
        return style

    def cell_style(self, level: str) -> Style:
        return self._style(f"cell--{level}") if level else Style()

    def restyle(self) -> None:
        """The theme changed: drop every cached row and draw again with the new styles."""
        self._styles.clear()
        self._strips.clear()
        self._final.clear()
        self._header = None
        self.refresh()

    # --- rows ------------------------------------------------------------------------------

    def _segments(self, cells: Iterable[Cell]) -> list[Segment]:
        segs = []
        for key, (text, level) in zip(self._columns, cells):
            w = self._widths[key]
            if len(text) > w:  # a cut label says so; numbers are sized never to be cut
                text = text[:max(0, w - 1)] + "…" if key in self.LEFT else text[:w]
            body = text.ljust(w) if key in self.LEFT else text.rjust(w)
            segs.append(Segment(" " * PAD + body + " " * PAD, self.cell_style(level) or None))
        return segs

    def _row_strip(self, key: str) -> Strip:
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = Strip(self._segments(self._cells[key]), self._x[""])
        return strip

    def _header_strip(self) -> Strip:
        if self._header is None:
            labels = [(label, "") for _, label, _ in self.COLUMNS]
            segs = [Segment(s.text, self._style("livetable--header")) for s in self._segments(labels)]
            self._header = Strip(segs, self._x[""])
        return self._header

    def shown_width(self, width: int) -> int:
        """How much of each row a `width`-cell panel draws: whole columns only. A column
        that does not fit is left out rather than cut (a cut number reads as a smaller
        one), and the header says "›" in the blank after its last column (z zooms the
        panel to the full width). The last column's trailing blank may fall outside."""
        total = self._x[""]
        if total - PAD <= width:
            return total
        fit = 0
        for key in self._columns:
            end = self._x[key] + self._widths[key] + 2 * PAD
            if end - PAD > width:
                break
            fit = end
        return fit or width  # not even the first column: cut it (its label ends in "…")

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self._style("__base__")
        sx, sy = self.scroll_offset
        room = self.scrollable_content_region.width or width  # without the vertical scrollbar
        if y == 0:
            shown = self.shown_width(room)
            header = self._header_strip().crop_extend(sx, sx + shown, base)
            if shown < self._x[""] and min(shown, room) > 1:
                mark = Strip([Segment("›", self._style("livetable--header"))], 1)
                header = Strip.join([header.crop_extend(0, min(shown, room) - 1, base), mark])
            return header.crop_extend(0, width, base).apply_style(base)
        i = y - 1 + sy
        if i >= len(self._keys):
            return Strip.blank(width, base)
        key = self._keys[i]
        self._resolve(key)
        cursor = i == self.cursor and self.has_focus
        cached = self._final.get(key)
        if cached is not None and cached[0] == (sx, width, room, cursor):
            return cached[1]
        strip = self._row_strip(key)
        if cursor:
            strip = strip.apply_style(self._style("livetable--cursor"))
        shown = self.shown_width(room)  # only on a miss: a quiet tick redraws from the cache
        strip = strip.crop_extend(sx, sx + shown, base).crop_extend(0, width, base).apply_style(base)
        self._final[key] = ((sx, width, room, cursor), strip)
        return strip

    def row_keys(self) -> list[str]:
        return list(self._keys)

    class RowsShown(Message):
        """Other rows are on screen (the table scrolled, was resized or laid out): the
        live view then has their settings read every tick
        (nettop/collectors/settings_rotation.py)."""

    def shown_span(self) -> tuple[int, int] | None:
        """The rows [first, last) on screen now, as `sync_visible` draws them (one spare);
        (0, 0) when the table is hidden (the summary, another panel zoomed); None when it
        is about to be shown but not laid out yet (the first frame, a panel just
        unzoomed): which rows it will draw is not known, so the caller names none."""
        node: Any = self
        while isinstance(node, Widget):
            if not node.display:
                return (0, 0)
            node = node.parent
        if not self.region or self.size.height <= 0:
            return None
        sy = self.scroll_offset.y
        return (sy, min(len(self._keys), sy + max(1, self.size.height)))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.RowsShown())

    def on_resize(self) -> None:
        """Laid out or resized: another number of rows is on screen."""
        self.post_message(self.RowsShown())

    def cell(self, key: str, column: str) -> Cell:
        self._resolve(key)
        return self._cells[key][self._columns.index(column)]

    def _resolve(self, key: str) -> None:
        """Make the cells of a row that scrolled into view since `sync_visible` left it."""
        later = self._later
        if later is None:
            return
        index, make, made = later
        i = index.get(key)
        if i is None or i in made:
            return
        made.add(i)
        cells = make(i)
        if self._cells.get(key) != cells:
            self._cells[key] = cells
            self._strips.pop(key, None)
            self._final.pop(key, None)

    def sync_visible(self, keys: Sequence[str], make: Callable[[int], tuple[Cell, ...]]) -> None:
        """`sync` for long tables, of the rows `keys` whose cells `make(i)` gives: those of
        the rows on screen are made and compared now, those of the others only when they
        scroll into view (a 512-queue host formats the twenty rows it shows, not 512, each
        tick). The rows off screen keep their cells of record, found in C-level passes: a
        Python step per row was ~1.5 ms a tick at 512 rows."""
        keys = list(keys)
        n = len(keys)
        sy, height = self.scroll_offset.y, self.size.height
        first, last = min(sy, n), min(n, sy + max(1, height))  # rows [first, last) on screen (one spare)
        cells: list[Any] = list(map(self._cells.get, keys))  # None for a row not held yet: made now
        made = set(range(first, last))
        made.update(compress(range(n), map(operator.not_, cells)))
        for i in made:
            cells[i] = make(i)
        self._later = (dict(zip(keys, range(n))), make, made)
        self.sync(list(zip(keys, cells)))
        # the rows left to make are drawn again from their new cells when scrolled to
        kept = {keys[i]: self._final[keys[i]] for i in made if keys[i] in self._final}
        self._final = kept

    def width_of(self, column: str) -> int:
        """A column's width now."""
        return self._widths[column]

    def widen(self, column: str, width: int) -> None:
        """Give a column more room (rare: a longer interface name appeared)."""
        if width > self._widths[column]:
            self.set_width(column, width)

    def set_width(self, column: str, width: int) -> None:
        """Make a column exactly `width` wide, narrower too (the panel shrank)."""
        if width == self._widths[column]:
            return
        self._widths[column] = width
        self._x = self._offsets()
        self._strips.clear()
        self._final.clear()
        self._header = None
        self._resize_virtual()
        self.refresh()

    def sync(self, rows: Sequence[tuple[str, tuple[Cell, ...]]]) -> None:
        """Make the table hold exactly `rows` (key, cells) in this order, redrawing only
        the cells whose text or level changed (all of it only when rows come, go or move)."""
        keys = [k for k, _ in rows]
        if keys != self._keys:
            for gone in set(self._cells) - set(keys):
                del self._cells[gone]
                self._strips.pop(gone, None)
                self._final.pop(gone, None)
            for key, cells in rows:
                if self._cells.get(key) != cells:
                    self._cells[key] = cells
                    self._strips.pop(key, None)
                    self._final.pop(key, None)
                    self.cell_updates += len(cells)
            self._keys = keys
            self.cursor = min(self.cursor, max(0, len(keys) - 1))
            self._resize_virtual()
            self.refresh()
            return
        sx, sy = self.scroll_offset
        height = self.size.height
        for row, (key, cells) in enumerate(rows):
            old = self._cells[key]
            if old == cells:
                continue
            self._cells[key] = cells
            self._strips.pop(key, None)
            self._final.pop(key, None)
            changed = [c for c, before, after in zip(self._columns, old, cells) if before != after]
            self.cell_updates += len(changed)
            y = row + 1 - sy
            if 1 <= y < height:
                # one region per row, from the first to the last changed cell
                x0 = self._x[changed[0]]
                x1 = self._x[changed[-1]] + self._widths[changed[-1]] + 2 * PAD
                self.refresh(Region(x0 - sx, y, x1 - x0, 1))

    # --- keys --------------------------------------------------------------------------------

    def _move(self, to: int) -> None:
        old = self.cursor
        self.cursor = max(0, min(len(self._keys) - 1, to))
        visible = self.size.height - 1
        sy = self.scroll_offset.y
        if self.cursor < sy:
            self.scroll_to(y=self.cursor, animate=False)
        elif visible > 0 and self.cursor >= sy + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)
        if old != self.cursor:
            self.refresh()

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(1, self.size.height - 2))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


def _lvl(value: float | None, warm: float, hot: float) -> str:
    if value is None:
        return "muted"
    if value >= hot:
        return "hot"
    if value >= warm:
        return "warm"
    return ""


class QueueTable(LiveTable):
    COLUMNS = (("queue", "queue", 10), ("irq", "irq", 5), ("cpus", "cpus", 7),
               ("irq_s", "irq/s", 6), ("rx", "rx pps", 6), ("tx", "tx pps", 6),
               ("rps", "rps", 4), ("xps", "xps", 4), ("trend", "trend", 6))
    LEFT = frozenset({"queue", "irq", "cpus", "rps", "xps", "trend"})
    SORTS: ClassVar[tuple[str, ...]] = ("queue", "irq/s", "rx pkt/s", "tx pkt/s", "cpu")

    @staticmethod
    def cells(row: QueueRow, trend: str) -> tuple[Cell, ...]:
        irqs = ",".join(map(str, row.irqs)) if row.irqs else fmt.DASH
        if row.managed:
            irqs += "*"
        req, eff = fmt.cpu_list(row.affinity), fmt.cpu_list(row.effective)
        cpus = req if req == eff else f"{req}>{eff}"
        return (
            (row.shown_label, "muted" if row.settings_age > 0 else ""),  # settings not from this sample
            (irqs, "muted" if not row.irqs else ""),
            (cpus, "warm" if req != eff and row.affinity is not None else ""),
            (fmt.si(row.irq_per_s) if row.irqs else fmt.DASH, "" if row.irqs else "muted"),
            (fmt.si(row.rx_pps), "" if row.rx_pps is not None else "muted"),
            (fmt.si(row.tx_pps), "" if row.tx_pps is not None else "muted"),
            (fmt.mask(row.rps) if row.kind != "tx" else "", ""),
            (fmt.mask(row.xps) if row.kind != "rx" else "", ""),
            (trend, ""),
        )

    @staticmethod
    def sort_key(mode: str, row: QueueRow | QueueRef) -> tuple:
        """The row's place in `mode`'s order; a `QueueRef` computes only the figure sorted by."""
        natural = (row.ifname, row.index, row.kind)
        if mode == "irq/s":
            return (-(row.irq_per_s or 0.0), natural)
        if mode == "rx pkt/s":
            return (-(row.rx_pps or 0.0), natural)
        if mode == "tx pkt/s":
            return (-(row.tx_pps or 0.0), natural)
        if mode == "cpu":
            return ((row.effective or (1 << 30,))[0], natural)
        return natural


class CpuTable(LiveTable):
    COLUMNS = (("cpu", "cpu", 3), ("sirq", "sirq%", 5), ("hirq", "hirq%", 5), ("rx", "NET_RX", 6),
               ("tx", "NET_TX", 6), ("drop", "drop/s", 6), ("sqz", "squeeze", 7), ("rps", "rps/s", 5))

    @staticmethod
    def cells(row: CpuRow) -> tuple[Cell, ...]:
        return (
            (str(row.cpu), ""),
            (fmt.pct(row.softirq_pct), _lvl(row.softirq_pct, 20, 50)),
            (fmt.pct(row.irq_pct), _lvl(row.irq_pct, 10, 30)),
            (fmt.si(row.net_rx_per_s), ""),
            (fmt.si(row.net_tx_per_s), ""),
            (fmt.si(row.dropped_per_s), _lvl(row.dropped_per_s, 1e-9, 1e-9)),
            (fmt.si(row.squeeze_per_s), _lvl(row.squeeze_per_s, 1e-9, 100)),
            (fmt.si(row.rps_per_s), ""),
        )


class IfaceTable(LiveTable):
    COLUMNS = (("if", "interface", 10), ("rxb", "rx bit/s", 8), ("txb", "tx bit/s", 8),
               ("rxp", "rx pkt/s", 8), ("txp", "tx pkt/s", 8), ("drop", "drop/s", 6))
    LEFT = frozenset({"if"})


class QdiscTable(LiveTable):
    COLUMNS = (("if", "interface", 10), ("kind", "qdisc", 10), ("parent", "parent", 6),
               ("backlog", "backlog", 9), ("drops", "drops", 6), ("drops_s", "drop/s", 6),
               ("requeues", "requeues", 8))
    LEFT = frozenset({"if", "kind", "parent"})

    @staticmethod
    def cells(row: QdiscRow) -> tuple[Cell, ...]:
        return (
            (row.ifname, ""), (row.kind, ""), (row.parent, ""),
            (f"{fmt.si(row.backlog_bytes, 'B')}/{row.backlog_packets}p", _lvl(row.backlog_packets, 1, 100)),
            (fmt.si(row.drops), ""), (fmt.si(row.drops_per_s), _lvl(row.drops_per_s, 1e-9, 1e-9)),
            (fmt.si(row.requeues), ""),
        )


class BqlTable(LiveTable):
    COLUMNS = (("q", "BQL tx queue", 14), ("limit", "limit", 7), ("inflight", "inflight", 8),
               ("max", "limit_max", 9))
    LEFT = frozenset({"q"})

    @staticmethod
    def cells(row: BqlRow) -> tuple[Cell, ...]:
        full = row.limit > 0 and row.inflight >= row.limit
        return (
            (row.shown_label, "muted" if row.age > 0 else ""),
            (fmt.si(row.limit, "B"), ""),
            (fmt.si(row.inflight, "B"), "warm" if full else ""),
            (fmt.si(row.limit_max, "B"), "muted"),
        )


class LatencyTable(LiveTable):
    # ms columns hold 0.04 .. 99.99 and 100 .. 99999: five wide, so the whole table fits the
    # half-width panel of a 120-column terminal (the header says the unit)
    COLUMNS = (("target", "target", 12), ("loss", "loss%", 5), ("avg", "avg", 5), ("p50", "p50", 5),
               ("p99", "p99", 5), ("max", "max ms", 6), ("note", "replies", 7))
    LEFT = frozenset({"target", "note"})

    def fit_target(self, targets: Iterable[str]) -> None:
        """The target column as wide as its longest name, but never so wide that the
        figures leave the panel: a long name (tcp://HOST:PORT) is cut with "…" instead."""
        want = label_width(targets, 14)
        room = self.scrollable_content_region.width
        if room:  # laid out: the figures' columns keep their room
            others = sum(w for k, w in self._widths.items() if k != "target")
            want = max(12, min(want, room - others - 2 * PAD * len(self._columns)))
        self.set_width("target", want)

    @staticmethod
    def cells(row: LatencyRow) -> tuple[Cell, ...]:
        def ms(v: float | None) -> Cell:
            return ("-", "muted") if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}", "")

        loss = row.loss_pct
        return (
            (row.target, ""),
            (fmt.pct(loss), "muted" if loss is None else _lvl(loss, 1e-9, 5)),
            ms(row.avg_ms), ms(row.p50_ms), ms(row.p99_ms), ms(row.max_ms),
            # replies/probes of the window: short, so the half-width panel at 120x40 keeps it
            (row.error or f"{row.received}/{row.sent}", "hot" if row.error else "muted"),
        )


def label_width(labels: Iterable[str], floor: int) -> int:
    return max([floor, *(min(len(s), LABEL_CAP) for s in labels)])
