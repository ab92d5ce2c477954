"""Drawing one point: the header, the notice and each panel, from the pure row builders
of `nettop.tui.model`.

Each `_draw_*` touches only its own panel and changes only what changed (tables sync
cells; charts replot only when the picture can have moved), so a frame on a quiet host
costs almost nothing. The mixin holds no state of its own: it reads the app's
(`source`, `picked`, sort, NUMA filter, chart keys) and is kept apart from the keys
so the drawing can be read, and changed, on its own.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, TypeVar, overload

from nettop.model.timeline import Point
from nettop.tui import format as fmt
from nettop.tui import model, playback
from nettop.tui.charts import CpuHeatmap, LatencyChart, ThroughputChart, due
from nettop.tui.ebpf_panel import DropTable, HardirqTable, NapiTable, SoftirqTable, header_text
from nettop.tui.recording import display_path
from nettop.tui.summary import CHART_LINES, CHART_MIN_LINES, SummaryData, SummaryView, summary_lines
from nettop.tui.tables import (
    BqlTable, CpuTable, IfaceTable, LatencyTable, QdiscTable, QueueTable, label_width,
)
from nettop.tui.widgets import EmptyState, Panel, TextLine

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget

    from nettop.pipeline import Source

    _AppBase = App[None]
else:
    _AppBase = object

W = TypeVar("W", bound="Widget")

HEATMAP_ABOVE_CPUS = 32
TREND_WIDTH = 6
CHART_LINES_MAX = 4  # interfaces plotted (two lines each); the table above lists them all
NO_LATENCY = "no latency probe: run with --ping HOST"
NO_EBPF = "eBPF probes are off: press e to turn them on (root and bcc)"


def _queue_cells(ref: model.QueueRef, trends: model.QueueTrends) -> tuple[tuple[str, str], ...]:
    return QueueTable.cells(ref.row(), fmt.sparkline(trends.of(ref), TREND_WIDTH))


class DrawingMixin(_AppBase):
    """Draws a `Point` into the app's widgets; needs the app's state listed below."""

    source: Source
    latest: Point | None
    picked: frozenset[str] | None
    sort_mode: str
    sort_reverse: bool
    numa_only: bool
    replaying: bool
    seeking: int
    window_s: float
    record_error: str | None
    _own_cpu: float | None
    _chart_key: tuple | None
    _chart_t: float | None
    _latency_events: int
    _latency_t: float | None
    _summary_chart: tuple[tuple, float] | None  # (what is plotted, when) on the summary's chart
    # what was last told to the source as on screen: (interfaces, queue rows drawn)
    _settings_shown: tuple[tuple[str, ...], dict[str, frozenset[tuple[str, int]]] | None] | None
    # the queue and BQL tables' rows in their drawn order: which are on screen is a span of these
    _queue_order: tuple[tuple[str, str, int], ...] = ()  # (interface, kind, index)
    _bql_order: tuple[tuple[str, int], ...] = ()  # (interface, tx queue)
    _names_shown: tuple[str, ...] = ()  # the interfaces of the last frame
    _rows_known = False  # the last frame drew the queue rows (it had rates)
    _widget_memo: dict[object, Any]  # `_one`'s answers; the app sets it empty

    @overload
    def _one(self, selector: type[W]) -> W: ...
    @overload
    def _one(self, selector: str, expect_type: type[W]) -> W: ...
    @overload
    def _one(self, selector: str) -> Widget: ...

    def _one(self, selector: Any, expect_type: Any = None) -> Any:
        """`query_one`, remembered: the live view composes its widgets once and never
        replaces them, and each frame asks for a score of them (a query parses its
        selector and looks it up every time)."""
        widget = self._widget_memo.get(selector)
        if widget is None:
            widget = self._widget_memo[selector] = (self.query_one(selector) if expect_type is None
                                                    else self.query_one(selector, expect_type))
        return widget

    # hooks: doctor_panel.DoctorMixin, which the app mixes in, draws the findings panel
    # and counts the findings for the header (as TuningMixin.experiment_disabled)
    def _draw_doctor(self, point: Point) -> None:
        """Draw the findings panel for `point`; DoctorMixin does."""

    def doctor_header(self) -> str | None:
        """"findings 2 (1 crit)" for the header; DoctorMixin says it."""
        return None

    def redraw(self) -> None:
        if self.latest is not None:
            with self.batch_update():
                self._draw(self.latest)

    def selected_queue(self) -> Any:
        """The queue row under the queues table's cursor (None before the first sample)."""
        if self.latest is None or self._one("#summary").display:
            return None  # the summary has no cursor: tuning keys ask to pick a queue (1)
        table = self._one(QueueTable)
        keys = table.row_keys()
        if not keys:
            return None
        key = keys[min(table.cursor, len(keys) - 1)]
        return next((r for r in model.queue_rows(self.latest, self.shown(self.latest)) if r.key == key), None)

    def shown(self, point: Point) -> list[str]:
        return model.shown_interfaces(point.snapshot, self.picked)

    def _draw(self, point: Point) -> None:
        names = self.shown(point)
        self._names_shown = tuple(names)
        self._rows_known = point.rates is not None  # the first point has no rates, so no queue rows
        # first: the header counts the findings and the summary leads with the worst
        self._draw_doctor(point)
        self._draw_header(point)
        self._draw_notice(point)
        if self._one("#summary").display:  # the panels are hidden: drawn when shown
            self._draw_summary(point, names)
            self._show_settings()
            return
        self._draw_queues(point, names)
        self._draw_cpus(point, names)
        self._draw_throughput(point, names)
        self._draw_qdisc(point, names)
        self._draw_latency(point)
        self._draw_ebpf(point)
        self._show_settings()

    def on_live_table_rows_shown(self, _message: Any) -> None:
        """A table scrolled: its newly shown rows' settings are read from the next tick on."""
        if self.latest is not None:
            self._show_settings()

    def _show_settings(self) -> None:
        """Tell the source what settings are on screen, when that changed: the queue and
        BQL rows drawn (read every tick, their IRQs' affinity too; the rest of each
        interface in rotation, with its age shown). The summary names each interface's
        hottest queue, which can be another one every tick and has no room for an age:
        it keeps its interfaces' queues all on screen; so does a frame whose queue rows
        are not known (the first point has no rates; a table not laid out yet)."""
        names = self._names_shown
        rows: dict[str, frozenset[tuple[str, int]]] | None = None
        summary = self._one("#summary").display
        qspan = None if summary else self._one(QueueTable).shown_span()
        bspan = None if summary else self._one(BqlTable).shown_span()
        if self._rows_known and qspan and bspan:
            drawn: dict[str, set[tuple[str, int]]] = {n: set() for n in names}
            for name, kind, index in self._queue_order[qspan[0]:qspan[1]]:
                drawn.setdefault(name, set()).add((kind, index))
            for name, index in self._bql_order[bspan[0]:bspan[1]]:
                drawn.setdefault(name, set()).add(("tx", index))
            rows = {n: frozenset(r) for n, r in drawn.items()}
        if (names, rows) != self._settings_shown:
            self._settings_shown = (names, rows)
            self.source.show_settings(names, rows)

    def _draw_header(self, point: Point | None = None) -> None:
        point = point or self.latest
        if self.replaying:
            self._draw_replay_header(point)
            return
        src = self.source
        state = "PAUSED" if src.paused else src.mode
        parts = [f"nettop {state}", f"every {fmt.interval(src.interval)}"]
        session = src.session()
        if session is not None:  # a change on this path is applied on trial
            parts.insert(1, f"{fmt.SESSION_MARK} ssh via {session.ifname}" if session.ifname else f"{fmt.SESSION_MARK} ssh: path unknown")
        status = src.tap.status() if src.tap is not None else None
        if status is not None:
            parts.insert(1, f"● REC {display_path(status.path)} {playback.size_text(status.size)}")
        if self._own_cpu is not None:
            parts.append(f"nettop CPU {self._own_cpu:.1f}%")
        doctor_at = 1
        if point is not None:
            snap = point.snapshot
            shown = _dt.datetime.fromtimestamp(snap.t_wall, _dt.timezone.utc).strftime("%H:%M:%S") + " UTC"
            if src.mode == "capture":  # another host's files: its capture time, never a clock
                parts[0] = "nettop PAUSED capture" if src.paused else "nettop CAPTURE (not live)"
                note = src.capture_note
                if note is not None:  # read once, not sampled: say what the figures are
                    parts[1] = ("since boot" if note.startswith("one capture:") else "between captures"
                                if note.startswith("two captures") else "totals only")
                when = src.captured_at
                shown = ("captured " + _dt.datetime.fromtimestamp(when, _dt.timezone.utc).strftime(
                    "%Y-%m-%d %H:%M:%S UTC") if when is not None else "capture time unknown")
                # which host and when first: at 80 columns the rest is what gets cut
                parts[1:1] = [shown, snap.host, snap.kernel]
                doctor_at = 4
            else:
                parts += [snap.host, snap.kernel, shown]
            if point.rates is not None and point.rates.sampler_cpu_pct is not None:
                parts.append(f"sampler {point.rates.sampler_cpu_pct:.1f}%")
        probes = self._probe_text(point)
        if probes is not None:
            parts.insert(doctor_at + 1, probes)
        parts[doctor_at:doctor_at] = [t for t in (self.doctor_header(),) if t]
        self._one("#header", TextLine).set(" │ ".join(parts))

    def _draw_replay_header(self, point: Point | None) -> None:
        src, pb = self.source, self.source.playback()
        state = "nettop replay"
        if self.seeking:
            state += " seeking…"
        elif src.paused:
            state += " PAUSED"
        elif pb is not None and pb.at_end:
            state += " (end)"
        parts = [state, f"speed {playback.speed_text(pb.speed)}" if pb is not None else f"every {fmt.interval(src.interval)}"]
        if point is not None:
            snap = point.snapshot
            if pb is not None and pb.of_capture:  # another host's files, never a clock
                parts[0] = parts[0].replace("nettop replay", "nettop replay CAPTURE", 1)
                when = pb.captured_at
                # its time first: at 80 columns the kernel's name is what gets cut
                parts[1:2] = ["captured " + playback.stamp(when) if when is not None else "capture time unknown",
                              snap.host, snap.kernel]
            else:
                parts += [snap.host, snap.kernel, playback.stamp(snap.t_wall)]
        if pb is not None:
            parts.append(f"sample {pb.position + 1}/{pb.length}")
        probes = self._probe_text(point)
        if probes is not None:
            parts.append(probes)
        at = 2 if pb is not None and pb.of_capture else 1  # a capture's time first: 80 columns cut the rest
        parts[at:at] = [t for t in (self.doctor_header(),) if t]
        self._one("#header", TextLine).set(" │ ".join(parts))

    def _draw_notice(self, point: Point | None = None) -> None:
        point = point or self.latest
        if self.replaying:
            pb = self.source.playback()
            text: str | None = playback.replay_notice(pb.path, list(pb.warnings)) if pb is not None else None
        else:
            text = model.root_notice(point.snapshot, self.source.is_root) if point is not None else None
        if self.record_error is not None:
            text = self.record_error + (f" │ {text}" if text else "")
        notice = self._one("#notice", TextLine)
        if text is None:
            if notice.display:
                notice.display = False
            return
        notice.set(text)
        if not notice.display:
            notice.display = True

    def _draw_summary(self, point: Point, names: list[str]) -> None:
        points = self.source.timeline.points()[-max(model.IDLE_WINDOW, TREND_WIDTH + 2):]
        session = self.source.session()
        carried = [d for d in session.devices if d in point.snapshot.links] if session is not None else []
        first = carried + [n for n in model.first_interfaces(point.snapshot, self.source.route_ifindexes())
                           if n not in carried]
        order = model.summary_order(point.rates, names, first)
        # what the operator picked with `i` stays on screen even when idle
        idle = [] if self.picked is not None else model.idle_interfaces(points, order, keep=first)
        links = point.snapshot.links
        busy = [n for n in order if n not in idle]
        lat_trend = {t: ys for t, (_, ys) in model.latency_series(points[-TREND_WIDTH:], 1e9).items()}
        data = SummaryData(
            ifaces=model.iface_summaries(points, busy, first, TREND_WIDTH + 2, carried),
            idle=[(n, links[n].operstate if n in links else "gone") for n in idle],
            cpus=model.cpu_rows(point), latency=model.latency_rows(point.snapshot), latency_trend=lat_trend,
            qdiscs=model.qdisc_summaries(point, busy), probing=self.source.prober is not None,
            findings=[(f.severity.label, f"{f.subject}: {f.title}") for f in sorted(
                getattr(self, "_doctor_shown", []), key=lambda f: -f.severity.value)],
            cpu_nodes=self.source.cpu_nodes,
        )
        box = self._one("#summary")
        width, height = box.size
        if width <= 0 or height <= 0:
            return  # not laid out yet: drawn again once it is (on_resize)
        lines = summary_lines(data, width, height)
        view, chart = self._one(SummaryView), self._one("#summary-chart", ThroughputChart)
        with_chart = height - len(lines) >= CHART_MIN_LINES
        rows = len(lines) if with_chart else height
        if view.styles.height is None or view.styles.height.value != rows:
            view.styles.height = rows
        if chart.display != with_chart:
            chart.display = with_chart
            self._summary_chart = None
        view.show(lines)
        if with_chart:
            plotted = model.busiest(point.rates, busy, CHART_LINES)
            key = (tuple(plotted), self.source.timeline.event_serial, height - rows)
            last = self._summary_chart
            if last is None or last[0] != key or due(last[1], point.snapshot.t_mono, self.window_s, chart.size.width):
                self._summary_chart = (key, point.snapshot.t_mono)
                chart.show(model.throughput_of(self.source.timeline, plotted, self.window_s),
                           model.event_offsets(self.source.timeline.events(), point.snapshot, self.window_s),
                           self.window_s)

    def _draw_queues(self, point: Point, names: list[str]) -> None:
        # every queue is sorted, but only the rows drawn are joined and get a trend
        table = self._one(QueueTable)
        refs = model.queue_refs(point, names)
        table.widen("queue", model.queue_label_width(refs, 10, table.width_of("queue")))  # before the sort
        refs.sort(key=lambda r: QueueTable.sort_key(self.sort_mode, r), reverse=self.sort_reverse)
        trends = model.QueueTrends(self.source.timeline.points()[-TREND_WIDTH:], TREND_WIDTH)
        table.sync_visible([r.key for r in refs], lambda i: _queue_cells(refs[i], trends))
        self._queue_order = tuple((r.ifname, r.kind, r.index) for r in refs)

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
        table, heatmap = self._one(CpuTable), self._one(CpuHeatmap)
        if table.display == heat:
            table.display, heatmap.display = not heat, heat
        if heat:
            heatmap.show(rows, caption, self.source.cpu_nodes)
        else:
            table.sync([(str(r.cpu), CpuTable.cells(r)) for r in rows])
        self._one("#cpus", Panel).set_status(caption.split("(", 1)[-1].rstrip(")") if "(" in caption else "")

    def _draw_throughput(self, point: Point, names: list[str]) -> None:
        rows = []
        rates = point.rates

        def bits(v: float | None) -> float | None:
            return None if v is None else 8 * v

        session = self.source.session()
        carried = set(session.devices) if session is not None else set()
        # busiest first: on a host with many interfaces the ones moving traffic stay in view
        for name in model.busiest(rates, names, len(names), by_load=True):
            lr = rates.links.get(name) if rates else None
            drops = None
            if lr and lr.rx_dropped_per_s is not None and lr.tx_dropped_per_s is not None:
                drops = lr.rx_dropped_per_s + lr.tx_dropped_per_s
            rows.append((name, (
                (f"{name} {fmt.SESSION_MARK}" if name in carried else name, ""),
                (fmt.si(bits(lr.rx_bytes_per_s) if lr else None), ""),
                (fmt.si(bits(lr.tx_bytes_per_s) if lr else None), ""),
                (fmt.si(lr.rx_packets_per_s if lr else None), ""),
                (fmt.si(lr.tx_packets_per_s if lr else None), ""),
                (fmt.si(drops), "hot" if drops else ""),
            )))
        table = self._one(IfaceTable)
        table.widen("if", label_width([f"{n} {fmt.SESSION_MARK}" if n in carried else n for n in names], 10))
        table.sync(rows)
        chart = self._one("#throughput-chart", ThroughputChart)
        plotted = model.busiest(rates, names, CHART_LINES_MAX)
        key = (tuple(plotted), self.source.timeline.event_serial)  # a new event: a new marker
        now = point.snapshot.t_mono
        # plotting is the dearest part of a frame: only when the picture can have moved
        if key != self._chart_key or due(self._chart_t, now, self.window_s, chart.size.width):
            self._chart_key, self._chart_t = key, now
            markers = model.event_offsets(self.source.timeline.events(), point.snapshot, self.window_s)
            chart.show(model.throughput_of(self.source.timeline, plotted, self.window_s), markers, self.window_s)

    def _draw_qdisc(self, point: Point, names: list[str]) -> None:
        qt = self._one(QdiscTable)
        rows = model.qdisc_rows(point, names)
        qt.widen("if", label_width((r.ifname for r in rows), 10))
        qt.sync_visible([r.key for r in rows], lambda i: QdiscTable.cells(rows[i]))  # mq: a child per queue
        brows = model.bql_rows(point.snapshot, names)
        bt = self._one(BqlTable)
        bt.widen("q", model.bql_label_width(brows, 14, bt.width_of("q")))
        bt.sync_visible([r.key for r in brows], lambda i: BqlTable.cells(brows[i]))
        self._bql_order = tuple((r.ifname, r.queue) for r in brows)

    def _draw_latency(self, point: Point) -> None:
        series = model.latency_series_of(self.source.timeline, self.window_s)
        chart, table = self._one(LatencyChart), self._one(LatencyTable)
        empty = self._one("#latency-empty")
        if not series:
            if chart.display:
                chart.display = table.display = False
                empty.display = True
            return
        if not chart.display:
            chart.display = table.display = True
            empty.display = False
        rows = model.latency_rows(point.snapshot)
        table.fit_target(r.target for r in rows)
        table.sync([(r.key, LatencyTable.cells(r)) for r in rows])
        serial = self.source.timeline.event_serial
        if serial != self._latency_events or due(self._latency_t, point.snapshot.t_mono, self.window_s,
                                                 chart.size.width):
            self._latency_events, self._latency_t = serial, point.snapshot.t_mono
            chart.show(series, model.event_offsets(self.source.timeline.events(), point.snapshot, self.window_s),
                       self.window_s)

    def _probe_text(self, point: Point | None) -> str | None:
        switch = self.source.probe_switch
        sample = point.snapshot.ebpf if point is not None else None
        if switch is not None:
            state: str | None = switch.state
        else:  # a source without a switch: a replay shows recorded figures, others report them as on
            state = "on" if sample is not None and not self.replaying else None
        return header_text(state, sample)

    def _draw_ebpf(self, point: Point) -> None:
        sample = point.snapshot.ebpf
        switch = self.source.probe_switch
        panel = self._one("#ebpf", Panel)
        busy = switch is not None and switch.state != "off"
        if sample is None and not busy and not panel.display:
            return
        if not panel.display:
            panel.display = True
        empty = self._one("#ebpf-empty", EmptyState)
        tables: list[NapiTable | SoftirqTable | HardirqTable | DropTable] = [
            self._one(NapiTable), self._one(SoftirqTable), self._one(HardirqTable),
            self._one(DropTable)]
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
