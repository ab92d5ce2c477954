"""The live full-screen app: header, five panels, footer; keyboard only.

The app is handed a `Source` and never reads the kernel: the source's thread puts each
new point in a mailbox and wakes the app with one message; the handler takes the newest
point and updates every panel inside one batch. Tables change only the cells whose
text changed; charts are redrawn only when a point arrives. Layout is CSS: a scrollable
stack of panels on small terminals, a grid on large ones, one panel when zoomed.

A replay source adds its keys (step, events, speed, go to a time); moves that rebuild
the chart history run on a worker thread so the screen never freezes. A live source
adds the record key: the source's own thread writes each sample, the app only starts,
stops and shows "● REC".
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from nettop.model.timeline import Event, Point
from nettop.tui import format as fmt
from nettop.tui import model
from nettop.tui.charts import CpuHeatmap, LatencyChart, ThroughputChart, due
from nettop.tui.ebpf_panel import DropTable, HardirqTable, NapiTable, SoftirqTable, header_text
from nettop.tui import playback
from nettop.tui.playback import RECORD_ACTIONS, RECORD_BINDINGS, REPLAY_ACTIONS, REPLAY_BINDINGS
from nettop.tui.recording import RecordStatus, display_path, recording_meta
from nettop.tui.screens import HelpScreen, InterfacePicker, Prompt
from nettop.tui.source import Source
from nettop.tui.tables import (
    BqlTable, CpuTable, IfaceTable, LatencyTable, QdiscTable, QueueTable, label_width,
)
from nettop.tui.tuning import TUNING_ACTIONS, TUNING_BINDINGS, TuningMixin
from nettop.tui.themes import DEFAULT_THEME, NO_COLOR_THEME, THEME_ORDER, load_themes

INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
HEATMAP_ABOVE_CPUS = 32
TREND_WIDTH = 6
CHART_LINES_MAX = 4  # interfaces plotted (two lines each); the table above lists them all
PANELS = ("queues", "cpus", "throughput", "latency", "qdisc")
NO_LATENCY = "no latency probe: run with --ping HOST"
NO_EBPF = "eBPF probes are off: press e to turn them on (root and bcc)"


class ProbesChanged(Message):
    """The eBPF switch finished starting or stopping (posted from its thread)."""


class NewPoint(Message):
    """The source has a point waiting in its mailbox."""


class Moved(Message):
    """A replay move (step, seek, event jump) finished on its worker thread."""

    def __init__(self, what: str, result: Any, error: str | None = None) -> None:
        super().__init__()
        self.what = what
        self.result = result
        self.error = error


class TextLine(Widget):
    """One line of plain text that repaints only when its text changes (never a re-layout)."""

    def __init__(self, text: str = "", *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._text = text

    @property
    def text(self) -> str:
        return self._text

    def set(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.refresh()

    def render(self) -> Text:
        return Text(self._text, no_wrap=True, overflow="ellipsis", end="")


class EmptyState(Static, can_focus=True):
    """What a panel says while it has nothing to show; focusable so the panel can be zoomed."""


class Panel(Vertical):
    """One titled panel; the app zooms and jumps between these."""

    def __init__(self, title: str, *children: Widget, id: str) -> None:  # noqa: A002
        super().__init__(*children, id=id, classes="panel")
        self.title = title
        self.status = ""
        self.border_title = title

    def set_status(self, status: str) -> None:
        """Show `status` after the title (panels have only a top border to carry text)."""
        if status != self.status:
            self.status = status
            self.border_title = f"{self.title} · {status}" if status else self.title


def next_interval(current: float, direction: int) -> float:
    """The next step up (+1) or down (-1) the interval ladder from `current`."""
    if direction > 0:
        bigger = [s for s in INTERVAL_STEPS if s > current + 1e-9]
        return bigger[0] if bigger else INTERVAL_STEPS[-1]
    smaller = [s for s in INTERVAL_STEPS if s < current - 1e-9]
    return smaller[-1] if smaller else INTERVAL_STEPS[0]


class NettopApp(TuningMixin, App[None]):
    CSS_PATH = str(Path(__file__).with_name("nettop.tcss"))  # absolute: subclasses live elsewhere
    TITLE = "nettop"
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", key_display="?", tooltip="this help: every key"),
        Binding("q", "quit", "quit", tooltip="quit nettop"),
        Binding("space,p", "pause", "pause", tooltip="pause / resume sampling (the screen keeps the last sample)"),
        Binding("plus,equals_sign", "interval(1)", "interval", key_display="+/-",
                tooltip="longer sampling interval (0.1 0.2 0.5 1 2 5 10 30 60 s)"),
        Binding("minus", "interval(-1)", "faster", show=False, tooltip="shorter sampling interval"),
        Binding("i", "interfaces", "ifaces", tooltip="pick the interfaces shown in every panel"),
        Binding("z", "zoom", "zoom", tooltip="zoom the focused panel to the whole screen, again to go back"),
        Binding("t", "next_theme", "theme", tooltip="next theme: dark, light, mono (high contrast)"),
        Binding("s", "sort", "sort", tooltip="sort queues by: queue, irq/s, rx pps, tx pps, CPU"),
        Binding("r", "reverse", "reverse", show=False, tooltip="reverse the queue sort order"),
        Binding("n", "numa", "NUMA", show=False,
                tooltip="CPUs: only those on the shown NICs' NUMA node (or all again)"),
        Binding("m", "mark", "mark", show=False, tooltip="put an event marker on the charts at the newest sample"),
        Binding("1", "panel('queues')", "queues", show=False, tooltip="go to the queues panel"),
        Binding("2", "panel('cpus')", "CPUs", show=False, tooltip="go to the CPUs panel"),
        Binding("3", "panel('throughput')", "throughput", show=False, tooltip="go to the throughput panel"),
        Binding("4", "panel('latency')", "latency", show=False, tooltip="go to the latency panel"),
        Binding("5", "panel('qdisc')", "qdisc/BQL", show=False, tooltip="go to the qdisc / BQL panel"),
        Binding("6", "panel('ebpf')", "eBPF", show=False, tooltip="go to the eBPF panel (NAPI, hardirq, softirq, drops)"),
        Binding("e", "probes", "eBPF", show=False, tooltip="eBPF probes on/off: NAPI polling, hardirq time, softirq latency, "
                "drops by reason (root, bcc)"),
        *REPLAY_BINDINGS,
        *RECORD_BINDINGS,
        *TUNING_BINDINGS,
    ]

    def __init__(self, source: Source, window_s: float = 180.0, driver_class=None,  # type: ignore[no-untyped-def]
                 tuner: Any = None) -> None:
        super().__init__(driver_class=driver_class)
        self.source = source
        self.tuner = tuner  # nettop.actions.Tuner, made on the first tuning key when None
        self.window_s = window_s
        self.picked: frozenset[str] | None = None
        self.sort_mode = QueueTable.SORTS[0]
        self.sort_reverse = False
        self.numa_only = False
        self.zoomed: str | None = None
        self.latest: Point | None = None
        self.frames = 0  # points drawn: tests check bursts collapse into one frame
        self._own_cpu: float | None = None
        self._chart_key: tuple | None = None
        self._chart_t: float | None = None
        self._latency_events = -1
        self._latency_t: float | None = None
        self._drawn_timeline: object = None  # a replay seek replaces the source's Timeline
        self.replaying = source.mode == "replay"
        self.seeking = 0  # replay moves under way on the worker
        self.record_error: str | None = None  # one line, shown in the notice
        self.recorded: list[RecordStatus] = []  # files written by the record key, for the exit line
        for theme in load_themes().values():
            self.register_theme(theme)
        self.theme = NO_COLOR_THEME if self.no_color else DEFAULT_THEME

    # --- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TextLine("nettop: waiting for the first sample", id="header")
        yield TextLine("", id="notice")
        with VerticalScroll(id="panels", can_focus=False):
            yield Panel("1 queues", QueueTable(id="queues-table"), id="queues")
            yield Panel("2 CPUs", CpuTable(id="cpus-table"), CpuHeatmap(id="cpus-heatmap"), id="cpus")
            yield Panel("3 throughput", IfaceTable(id="ifaces-table"), ThroughputChart(id="throughput-chart"),
                        id="throughput")
            yield Panel("5 qdisc / BQL", QdiscTable(id="qdisc-table"), BqlTable(id="bql-table"), id="qdisc")
            yield Panel("4 latency", EmptyState(NO_LATENCY, id="latency-empty"),
                        LatencyTable(id="latency-table"), LatencyChart(id="latency-chart"), id="latency")
            yield Panel("6 eBPF", EmptyState(NO_EBPF, id="ebpf-empty"), NapiTable(id="napi-table"),
                        SoftirqTable(id="softirq-table"), HardirqTable(id="hardirq-table"),
                        DropTable(id="drop-table"), id="ebpf")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#queues", Panel).set_status("sort: queue")
        self.query_one("#latency-chart").display = False
        self.query_one("#latency-table").display = False
        self.query_one("#cpus-heatmap").display = False
        self.query_one("#notice").display = False
        self.query_one("#ebpf").display = False  # until probes run or a recording has their figures
        switch = getattr(self.source, "probe_switch", None)
        if switch is not None:
            switch.changed = lambda: self.post_message(ProbesChanged())
        self.query_one("#queues-table").focus()
        self.source.start(self._wake)

    def on_resize(self) -> None:
        diff = getattr(self._driver, "screen_diff", None)
        if diff is not None:
            diff.invalidate()

    def on_unmount(self) -> None:
        self._stop_recording()
        self.source.stop()

    def _wake(self) -> None:
        self.post_message(NewPoint())

    # --- data --------------------------------------------------------------------------

    @on(NewPoint)
    def _on_new_point(self) -> None:
        if not self.is_running:
            return  # shutting down: the screens are gone, a sample posted meanwhile is dropped
        point = self.source.take()
        if point is None:
            return
        self.latest = point
        self.frames += 1
        if self.source.timeline is not self._drawn_timeline:
            self._drawn_timeline = self.source.timeline
            self._chart_key, self._latency_events = None, -1  # new history: replot
        tap = getattr(self.source, "tap", None)
        if tap is not None and tap.error is not None and not tap.active:
            self._recording_failed(tap.error)
        own = self.source.own_cpu_percent()  # once per sample, so the % covers one interval
        if own is not None:
            self._own_cpu = own
        with self.batch_update():
            self._draw(point)

    def redraw(self) -> None:
        if self.latest is not None:
            with self.batch_update():
                self._draw(self.latest)

    def selected_queue(self) -> Any:
        """The queue row under the queues table's cursor (None before the first sample)."""
        if self.latest is None:
            return None
        table = self.query_one(QueueTable)
        keys = table.row_keys()
        if not keys:
            return None
        key = keys[min(table.cursor, len(keys) - 1)]
        return next((r for r in model.queue_rows(self.latest, self.shown(self.latest)) if r.key == key), None)

    def shown(self, point: Point) -> list[str]:
        return model.shown_interfaces(point.snapshot, self.picked)

    def _draw(self, point: Point) -> None:
        names = self.shown(point)
        self._draw_header(point)
        self._draw_notice(point)
        self._draw_queues(point, names)
        self._draw_cpus(point, names)
        self._draw_throughput(point, names)
        self._draw_qdisc(point, names)
        self._draw_latency(point)
        self._draw_ebpf(point)

    def _draw_header(self, point: Point | None = None) -> None:
        point = point or self.latest
        if self.replaying:
            self._draw_replay_header(point)
            return
        src = self.source
        state = "PAUSED" if src.paused else src.mode
        parts = [f"nettop {state}", f"every {fmt.interval(src.interval)}"]
        tap = getattr(src, "tap", None)
        status = tap.status() if tap is not None else None
        if status is not None:
            parts.insert(1, f"● REC {display_path(status.path)} {playback.size_text(status.size)}")
        if self._own_cpu is not None:
            parts.append(f"nettop CPU {self._own_cpu:.1f}%")
        if point is not None:
            snap = point.snapshot
            stamp = _dt.datetime.fromtimestamp(snap.t_wall, _dt.timezone.utc).strftime("%H:%M:%S")
            parts += [snap.host, snap.kernel, f"{stamp} UTC"]
            if point.rates is not None and point.rates.sampler_cpu_pct is not None:
                parts.append(f"sampler {point.rates.sampler_cpu_pct:.1f}%")
        probes = self._probe_text(point)
        if probes is not None:
            parts.insert(2, probes)
        self.query_one("#header", TextLine).set(" │ ".join(parts))

    def _draw_replay_header(self, point: Point | None) -> None:
        src: Any = self.source
        state = "nettop replay"
        if self.seeking:
            state += " seeking…"
        elif src.paused:
            state += " PAUSED"
        elif getattr(src, "at_end", False):
            state += " (end)"
        speed = getattr(src, "speed", None)
        parts = [state, f"speed {playback.speed_text(speed)}" if speed else f"every {fmt.interval(src.interval)}"]
        if point is not None:
            snap = point.snapshot
            parts += [snap.host, snap.kernel, playback.stamp(snap.t_wall)]
        reader = getattr(src, "reader", None)
        if reader is not None:
            parts.append(f"sample {src.position + 1}/{len(reader)}")
        probes = self._probe_text(point)
        if probes is not None:
            parts.append(probes)
        self.query_one("#header", TextLine).set(" │ ".join(parts))

    def _draw_notice(self, point: Point | None = None) -> None:
        point = point or self.latest
        if self.replaying:
            src: Any = self.source
            text: str | None = playback.replay_notice(getattr(src, "path", "?"), list(getattr(src, "warnings", [])))
        else:
            text = model.root_notice(point.snapshot, self.source.is_root) if point is not None else None
        if self.record_error is not None:
            text = self.record_error + (f" │ {text}" if text else "")
        notice = self.query_one("#notice", TextLine)
        if text is None:
            if notice.display:
                notice.display = False
            return
        notice.set(text)
        if not notice.display:
            notice.display = True

    def _draw_queues(self, point: Point, names: list[str]) -> None:
        table = self.query_one(QueueTable)
        rows = model.queue_rows(point, names)
        rows.sort(key=lambda r: QueueTable.sort_key(self.sort_mode, r), reverse=self.sort_reverse)
        table.widen("queue", label_width((r.label for r in rows), 10))
        hist = model.queue_activity_history(self.source.timeline.points()[-TREND_WIDTH:], rows, TREND_WIDTH)
        table.sync([(r.key, QueueTable.cells(r, fmt.sparkline(hist.get(r.key, []), TREND_WIDTH)))
                    for r in rows])

    def _numa_cpus(self, point: Point, names: list[str]) -> set[int] | None:
        nodes = {d.numa_node for n in names if (d := point.snapshot.devices.get(n)) and d.numa_node is not None}
        if not nodes or not self.source.cpu_nodes:
            return None
        return {c for c, node in self.source.cpu_nodes.items() if node in nodes}

    def _draw_cpus(self, point: Point, names: list[str]) -> None:
        rows = model.cpu_rows(point)
        caption = f"{len(rows)} CPUs, softirq %"
        if self.numa_only:
            keep = self._numa_cpus(point, names)
            if keep is None:
                caption += " (NUMA filter: node unknown, showing all)"
            else:
                rows = [r for r in rows if r.cpu in keep]
                caption += f" (NUMA filter: {len(rows)} CPUs on the NIC's node)"
        heat = len(point.snapshot.online_cpus) > HEATMAP_ABOVE_CPUS
        table, heatmap = self.query_one(CpuTable), self.query_one(CpuHeatmap)
        if table.display == heat:
            table.display, heatmap.display = not heat, heat
        if heat:
            heatmap.show(rows, caption)
        else:
            table.sync([(str(r.cpu), CpuTable.cells(r)) for r in rows])
        self.query_one("#cpus", Panel).set_status(caption.split("(", 1)[-1].rstrip(")") if "(" in caption else "")

    def _draw_throughput(self, point: Point, names: list[str]) -> None:
        rows = []
        rates = point.rates

        def bits(v: float | None) -> float | None:
            return None if v is None else 8 * v

        # busiest first: on a host with many interfaces the ones moving traffic stay in view
        for name in model.busiest(rates, names, len(names), by_load=True):
            lr = rates.links.get(name) if rates else None
            drops = None
            if lr and lr.rx_dropped_per_s is not None and lr.tx_dropped_per_s is not None:
                drops = lr.rx_dropped_per_s + lr.tx_dropped_per_s
            rows.append((name, (
                (name, ""),
                (fmt.si(bits(lr.rx_bytes_per_s) if lr else None), ""),
                (fmt.si(bits(lr.tx_bytes_per_s) if lr else None), ""),
                (fmt.si(lr.rx_packets_per_s if lr else None), ""),
                (fmt.si(lr.tx_packets_per_s if lr else None), ""),
                (fmt.si(drops), "hot" if drops else ""),
            )))
        table = self.query_one(IfaceTable)
        table.widen("if", label_width(names, 10))
        table.sync(rows)
        chart = self.query_one(ThroughputChart)
        events = self.source.timeline.events()
        plotted = model.busiest(rates, names, CHART_LINES_MAX)
        key = (tuple(plotted), len(events))
        now = point.snapshot.t_mono
        # plotting is the dearest part of a frame: only when the picture can have moved
        if key != self._chart_key or due(self._chart_t, now, self.window_s, chart.size.width):
            self._chart_key, self._chart_t = key, now
            markers = model.event_offsets(events, point.snapshot, self.window_s)
            points = self.source.timeline.points()
            chart.show(model.throughput(points, plotted, self.window_s), markers, self.window_s)

    def _draw_qdisc(self, point: Point, names: list[str]) -> None:
        qt = self.query_one(QdiscTable)
        rows = model.qdisc_rows(point, names)
        qt.widen("if", label_width((r.ifname for r in rows), 10))
        qt.sync([(r.key, QdiscTable.cells(r)) for r in rows])
        brows = model.bql_rows(point.snapshot, names)
        bt = self.query_one(BqlTable)
        bt.widen("q", label_width((f"{r.ifname} tx-{r.queue}" for r in brows), 14))
        bt.sync([(r.key, BqlTable.cells(r)) for r in brows])

    def _draw_latency(self, point: Point) -> None:
        series = model.latency_series(self.source.timeline.points(), self.window_s)
        chart, table = self.query_one(LatencyChart), self.query_one(LatencyTable)
        empty = self.query_one("#latency-empty")
        if not series:
            if chart.display:
                chart.display = table.display = False
                empty.display = True
            return
        if not chart.display:
            chart.display = table.display = True
            empty.display = False
        rows = model.latency_rows(point.snapshot)
        table.widen("target", label_width((r.target for r in rows), 14))
        table.sync([(r.key, LatencyTable.cells(r)) for r in rows])
        events = self.source.timeline.events()
        if len(events) != self._latency_events or due(self._latency_t, point.snapshot.t_mono, self.window_s,
                                                      chart.size.width):
            self._latency_events, self._latency_t = len(events), point.snapshot.t_mono
            chart.show(series, model.event_offsets(events, point.snapshot, self.window_s), self.window_s)

    def _probe_text(self, point: Point | None) -> str | None:
        switch = getattr(self.source, "probe_switch", None)
        sample = point.snapshot.ebpf if point is not None else None
        if switch is not None:
            state: str | None = switch.state
        else:  # a source without a switch: a replay shows recorded figures, others report them as on
            state = "on" if sample is not None and not self.replaying else None
        return header_text(state, sample)

    def _draw_ebpf(self, point: Point) -> None:
        sample = point.snapshot.ebpf
        switch = getattr(self.source, "probe_switch", None)
        panel = self.query_one("#ebpf", Panel)
        busy = switch is not None and switch.state != "off"
        if sample is None and not busy and not panel.display:
            return
        if not panel.display:
            panel.display = True
        empty = self.query_one("#ebpf-empty", EmptyState)
        tables: list[NapiTable | SoftirqTable | HardirqTable | DropTable] = [
            self.query_one(NapiTable), self.query_one(SoftirqTable), self.query_one(HardirqTable),
            self.query_one(DropTable)]
        if sample is None:
            if switch is not None and switch.state == "compiling":
                text = "eBPF: compiling the probes (a few seconds; sampling goes on)…"
            elif switch is not None and switch.reason:
                text = f"eBPF off: {switch.reason}"
            else:
                text = NO_EBPF if not self.replaying else "this recording has no eBPF figures"
            empty.update(text)
            empty.display = True
            for t in tables:
                t.display = False
            panel.set_status("")
            return
        from nettop.ebpf.sample import to_json

        doc = to_json(sample)
        empty.display = False
        for t in tables:
            if not t.display:
                t.display = True
            t.sync(t.rows(doc))
        polling = sum(1 for n in doc["napi"] if n["mode"] == "polling")
        status = f"{len(doc['napi'])} NAPI, {polling} polling · drops {fmt.si(doc['drops']['per_s'])}/s"
        if sample.duty > 1:
            status += f" · sampled 1/{sample.duty}"
        panel.set_status(status)

    @on(ProbesChanged)
    def _on_probes_changed(self) -> None:
        switch = getattr(self.source, "probe_switch", None)
        if switch is not None and switch.state == "off" and switch.reason:
            self.notify(f"eBPF off: {switch.reason}", severity="warning", timeout=8)
        elif switch is not None and switch.state == "on":
            self.notify("eBPF probes on", timeout=3)
        self._draw_header()
        if self.latest is not None:
            self._draw_ebpf(self.latest)

    def action_probes(self) -> None:
        switch = getattr(self.source, "probe_switch", None)
        if switch is None:
            why = "replay shows the recorded eBPF figures; probes cannot be turned on or off in a replay" \
                if self.replaying else "this view has no eBPF probes"
            self.notify(why, timeout=5)
            if self.replaying:
                self.action_panel("ebpf")
            return
        switch.toggle()
        self._draw_header()
        panel = self.query_one("#ebpf", Panel)
        if not panel.display:
            panel.display = True
        if self.latest is not None:
            self._draw_ebpf(self.latest)

    # --- actions -----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys only in a replay; the record key only on a source that can record."""
        if action in REPLAY_ACTIONS:
            return self.replaying
        if action in RECORD_ACTIONS:
            return not self.replaying and getattr(self.source, "tap", None) is not None
        return True

    def active_bindings_list(self) -> list[Binding]:
        """The app's bindings this source offers, in declaration order (help, palette)."""
        return [b for b in self.BINDINGS
                if isinstance(b, Binding) and self.check_action(b.action.split("(", 1)[0], ()) is not False]

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        why = self.tuning_disabled()

        def why_disabled(action: str) -> str | None:
            return why if action.split("(")[0] in TUNING_ACTIONS else None

        self.push_screen(HelpScreen(self.active_bindings_list(), why_disabled))

    def action_pause(self) -> None:
        self.source.paused = not self.source.paused
        self._draw_header()
        self.notify("paused" if self.source.paused else "sampling", timeout=2)

    def action_interval(self, direction: int) -> None:
        self.source.interval = next_interval(self.source.interval, direction)
        self._draw_header()

    def action_interfaces(self) -> None:
        if self.latest is None:
            self.notify("no sample yet: interfaces appear after the first tick", timeout=3)
            return
        names = sorted(self.latest.snapshot.links)
        shown = self.shown(self.latest)

        def apply(chosen: frozenset[str] | None) -> None:
            if chosen is not None:
                self.picked = chosen
                self.redraw()

        self.push_screen(InterfacePicker(names, shown), apply)

    def current_panel(self) -> str:
        node = self.focused
        while node is not None:
            if isinstance(node, Panel) and node.id:
                return node.id
            node = node.parent  # type: ignore[assignment]
        return "queues"

    def action_zoom(self) -> None:
        panels = self.query_one("#panels")
        if self.zoomed is not None:
            self.query_one(f"#{self.zoomed}").remove_class("-zoom")
            panels.remove_class("-zoomed")
            self.zoomed = None
            return
        self.zoomed = self.current_panel()
        self.query_one(f"#{self.zoomed}").add_class("-zoom")
        panels.add_class("-zoomed")

    def action_panel(self, name: str) -> None:
        panel = self.query_one(f"#{name}", Panel)
        if not panel.display:
            panel.display = True
            if self.latest is not None and name == "ebpf":
                self._draw_ebpf(self.latest)
        if self.zoomed is not None and self.zoomed != name:
            self.query_one(f"#{self.zoomed}").remove_class("-zoom")
            panel.add_class("-zoom")
            self.zoomed = name
        target = next((w for w in panel.query("*") if w.focusable and w.display), None)
        if target is not None:
            target.focus()
        panel.scroll_visible(animate=False)

    def action_next_theme(self) -> None:
        order = list(THEME_ORDER)
        i = order.index(self.theme) if self.theme in order else -1
        self.theme = order[(i + 1) % len(order)]

    def action_sort(self) -> None:
        sorts = QueueTable.SORTS
        self.sort_mode = sorts[(sorts.index(self.sort_mode) + 1) % len(sorts)]
        self._show_sort()

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._show_sort()

    def _show_sort(self) -> None:
        arrow = " (reversed)" if self.sort_reverse else ""
        self.query_one("#queues", Panel).set_status(f"sort: {self.sort_mode}{arrow}")
        self.redraw()

    def action_numa(self) -> None:
        self.numa_only = not self.numa_only
        self.redraw()

    def action_mark(self) -> None:
        t = self.latest.snapshot.t_wall if self.latest else 0.0
        self.source.timeline.add_event(Event(t, "mark", "marked by the operator"))
        self.redraw()

    # --- replay ------------------------------------------------------------------------

    def action_step(self, n: int) -> None:
        self.source.paused = True  # stepping is frame by frame: playback stops, as in players
        self._replay_move(lambda s: s.step(n), "step" if n > 0 else "back")

    def action_next_event(self, direction: int) -> None:
        self._replay_move(lambda s: s.next_event(direction), "event" if direction > 0 else "prev event")

    def action_speed(self, direction: int) -> None:
        src: Any = self.source
        new = playback.next_speed(src.speed, direction)
        src.interval = src.interval * src.speed / new  # the setter wakes the playback thread
        src.speed = new
        self._draw_header()
        self.notify(f"speed {playback.speed_text(new)}", timeout=2)

    def action_goto(self) -> None:
        if self.latest is None:
            return
        now = self.latest.snapshot.t_wall
        day = playback.stamp(now)[:10]

        def check(answer: str) -> str | None:
            try:
                playback.parse_goto(answer, now)
            except ValueError as exc:
                return str(exc)
            return None

        def go(answer: str | None) -> None:
            if answer:
                t = playback.parse_goto(answer, now)
                self._replay_move(lambda s: s.seek(t), "seek")

        self.push_screen(Prompt(f"Go to: HH:MM:SS (UTC, on {day}), or +/-seconds (+90, -5m); escape cancels",
                                placeholder=playback.stamp(now)[11:19], check=check, id="goto"), go)

    def _replay_move(self, move: Callable[[Any], Any], what: str) -> None:
        self.seeking += 1
        self._draw_header()
        self._move_worker(move, what)

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _move_worker(self, move: Callable[[Any], Any], what: str) -> None:
        """Runs a move on a thread (a seek replays ~180 samples); the new point arrives as
        usual through the source's mailbox, then `Moved` says it is done."""
        try:
            result = move(self.source)
        except Exception as exc:  # noqa: BLE001 - one line on screen, the app goes on
            self.post_message(Moved(what, None, f"{what}: {exc}"))
            return
        self.post_message(Moved(what, result))

    @on(Moved)
    def _on_moved(self, msg: Moved) -> None:
        self.seeking = max(0, self.seeking - 1)
        self._draw_header()
        if msg.error is not None:
            self.notify(msg.error, severity="error", timeout=5)
        elif msg.result is None:
            nothing = {"step": "end of the recording", "back": "start of the recording",
                       "event": "no later event", "prev event": "no earlier event"}
            if msg.what in nothing:
                self.notify(nothing[msg.what], timeout=2)
        elif isinstance(msg.result, Event):
            self.notify(f"{msg.result.kind}: {msg.result.text}", timeout=4)

    # --- record ------------------------------------------------------------------------

    def action_record(self) -> None:
        tap = getattr(self.source, "tap", None)
        if tap is None:
            return
        if tap.active:
            status = self._stop_recording()
            if status is not None:
                self.notify(f"recorded {status.samples} samples to {status.path} "
                            f"({playback.size_text(status.size)})", timeout=5)
            self._draw_header()
            return
        host = self.latest.snapshot.host if self.latest is not None else "host"
        default = playback.default_record_path(host, time.time())
        self.push_screen(Prompt("Record what the screen shows to (enter starts, R again stops, escape cancels):",
                                default, id="record-path"), self._start_recording)

    def _start_recording(self, path: str | None) -> None:
        from nettop.record.store import RecordingError

        if not path:
            return
        src: Any = self.source
        root = getattr(getattr(src, "root", None), "path", "/")
        meta = recording_meta(self.latest.snapshot if self.latest else None, src.interval, src.cpu_nodes, root)
        try:
            src.tap.start(path, meta, src.timeline)
        except (RecordingError, OSError) as exc:
            self._recording_failed(str(exc), starting=True)
            return
        self.record_error = None
        self._draw_notice()
        self._draw_header()

    def _stop_recording(self) -> RecordStatus | None:
        tap = getattr(self.source, "tap", None)
        status = tap.stop() if tap is not None else None
        if status is not None:
            self.recorded.append(status)
        return status

    def _recording_failed(self, error: str, starting: bool = False) -> None:
        line = f"{'not recording' if starting else 'recording stopped'}: {error}"
        if line == self.record_error:
            return
        self.record_error = line
        tap = getattr(self.source, "tap", None)
        if tap is not None:
            tap.error = None  # shown once; the notice keeps it until the next start
            if not starting and tap.finished is not None:
                self.recorded.append(tap.finished)
        self.notify(line, severity="error", timeout=5)
        self._draw_notice()
        self._draw_header()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for b in self.active_bindings_list():
            if b.action in ("quit",):
                continue
            key = b.key_display or b.key.split(",")[0]
            yield SystemCommand(f"nettop: {b.description}", f"key {key}",
                                lambda a=b.action: self.run_action(a))


def run(source: Source, revert_on_exit: bool = False) -> int:
    """Run the app on this terminal, sending it only the cells that change.

    With `revert_on_exit`, everything nettop changed is put back when the app exits
    normally; after a kill -9 `nettop restore` does it from the journal.
    """
    import os

    from nettop.tui.diffterm import diffing_driver

    no_color = "NO_COLOR" in os.environ  # read before Textual takes it out of the environment
    tuner = None
    if revert_on_exit and source.mode == "live":
        from nettop.actions.tuner import Tuner

        tuner = Tuner()
        tuner.revert_on_exit()
    app = NettopApp(source, driver_class=diffing_driver(no_color), tuner=tuner)
    app.run()
    for status in app.recorded:
        print(f"nettop: recorded {status.samples} samples to {status.path}")
    return 0


__all__ = ["Moved", "NettopApp", "NewPoint", "Panel", "next_interval", "run"]
