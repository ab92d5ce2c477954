"""Tables that are updated in place: one row per key, only changed cells rewritten.

Each table keeps the text and heat level of every cell it shows; a new tick compares
row by row and calls `update_cell` only where the text or level changed, so a quiet
host costs almost nothing to redraw. Heat levels are component classes styled in the
app's .tcss with theme variables; Python never names a colour.
"""

from __future__ import annotations

from typing import ClassVar, Iterable, Sequence

from rich.style import Style
from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from nettop.tui import format as fmt
from nettop.tui.model import BqlRow, CpuRow, QdiscRow, QueueRow

Cell = tuple[str, str]  # (text, level) where level is "", "warm", "hot" or "muted"
LEVELS = ("warm", "hot", "muted")


class LiveTable(DataTable):
    """A DataTable fed whole rows by key; it works out the minimal cell updates."""

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | {f"cell--{lv}" for lv in LEVELS}
    COLUMNS: ClassVar[tuple[tuple[str, str, int], ...]] = ()  # (key, label, width)
    LEFT: ClassVar[frozenset[str]] = frozenset()  # left-justified columns (others are numbers)

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, show_cursor=True)
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._styles: dict[str, Style] = {}
        self._widths = {k: w for k, _, w in self.COLUMNS}
        self.cell_updates = 0  # cells rewritten since mount: tests check quiet ticks cost nothing

    def on_mount(self) -> None:
        self._add_columns()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.restyle())

    def _add_columns(self) -> None:
        for key, label, _ in self.COLUMNS:
            self.add_column(label, width=self._widths[key], key=key)

    def _style(self, level: str) -> Style:
        if not level:
            return Style()
        style = self._styles.get(level)
        if style is None:
            style = self._styles[level] = self.get_component_rich_style(f"cell--{level}", partial=True)
        return style

    def _render(self, column: str, cell: Cell) -> Text:
        text, level = cell
        return Text(text, style=self._style(level), justify="left" if column in self.LEFT else "right",
                    no_wrap=True, end="")

    def widen(self, column: str, width: int) -> None:
        """Give a column more room (rare: a longer interface name appeared); rebuilds the table."""
        if width <= self._widths[column]:
            return
        self._widths[column] = width
        self.clear(columns=True)
        self._cells.clear()
        self._add_columns()

    def sync(self, rows: Sequence[tuple[str, tuple[Cell, ...]]]) -> None:
        """Make the table hold exactly `rows` (key, cells), touching only what changed."""
        keys = [k for k, _ in rows]
        wanted = set(keys)
        for gone in [k for k in self._cells if k not in wanted]:
            self.remove_row(gone)
            del self._cells[gone]
        columns = [k for k, _, _ in self.COLUMNS]
        for key, cells in rows:
            old = self._cells.get(key)
            if old is None:
                self.add_row(*(self._render(c, cell) for c, cell in zip(columns, cells)), key=key)
                self.cell_updates += len(cells)
            elif old != cells:
                for c, before, after in zip(columns, old, cells):
                    if before != after:
                        self.update_cell(key, c, self._render(c, after))
                        self.cell_updates += 1
            self._cells[key] = cells
        self._order(keys)

    def _order(self, keys: list[str]) -> None:
        """Show rows in the order of `keys`, the way DataTable.sort reorders (no rebuild)."""
        current = [r.key.value for r in self.ordered_rows]
        if current == keys:
            return
        self._row_locations = TwoWayDict({RowKey(k): i for i, k in enumerate(keys)})
        self._update_count += 1
        self.refresh()

    def restyle(self) -> None:
        """The theme changed: re-render every cell with the new theme's styles."""
        self._styles.clear()
        columns = [k for k, _, _ in self.COLUMNS]
        for key, cells in self._cells.items():
            for c, cell in zip(columns, cells):
                if cell[1]:
                    self.update_cell(key, c, self._render(c, cell))


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
            (row.label, ""),
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
    def sort_key(mode: str, row: QueueRow) -> tuple:
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
            (f"{row.ifname} tx-{row.queue}", ""),
            (fmt.si(row.limit, "B"), ""),
            (fmt.si(row.inflight, "B"), "warm" if full else ""),
            (fmt.si(row.limit_max, "B"), "muted"),
        )


def label_width(labels: Iterable[str], floor: int) -> int:
    return max([floor, *(min(len(s), 24) for s in labels)])
