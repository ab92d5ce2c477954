"""The live full-screen app: header, five panels, footer; keyboard only.

The app is handed a `Source` and never reads the kernel: the source's thread puts each
new point in a mailbox and wakes the app with one message; the handler takes the newest
point and updates every panel inside one batch. Tables change only the cells whose
text changed; charts are redrawn only when a point arrives. Below 120x34 (an SSH
session's 80x24) the screen is the summary (`summary.py`), every figure group at once,
and a panel key opens that panel zoomed; on larger terminals the panels are a grid (`v`
switches); one panel when zoomed. Hidden panels are not drawn.

A replay source adds its keys (step, events, speed, go to a time); moves that rebuild
the chart history run on a worker thread so the screen never freezes. A live source
adds the record key: the source's own thread writes each sample, the app only starts,
stops and shows "● REC".

This module holds the layout, the arrival of points and the view keys; seven mixins hold
the rest: the drawing `drawing.DrawingMixin`, the replay and record keys
`replay_keys.ReplayKeysMixin` and `record_keys.RecordKeysMixin`, the tuning keys
`tuning.TuningMixin`, the countdown of changes on trial `trial_bar.TrialMixin`, the findings panel `doctor_panel.DoctorMixin` and the experiment
keys `experiment_keys.ExperimentMixin`; the messages and small widgets have their own modules.
"""

from __future__ import annotations

import os

import select
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any, ClassVar, Iterable

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.dom import DOMNode
from textual.driver import Driver
from textual.screen import Screen
from textual.timer import Timer

from nettop.model.timeline import Event, Point
from nettop.pipeline import RecordStatus, Source
from nettop.tui.charts import CpuHeatmap, LatencyChart, ThroughputChart
from nettop.tui.doctor_panel import DOCTOR_BINDINGS, DoctorMixin, doctor_panel
from nettop.tui.drawing import NO_EBPF, NO_LATENCY
from nettop.tui.ebpf_panel import DropTable, HardirqTable, NapiTable, SoftirqTable
from nettop.tui.messages import NewPoint, ProbesChanged
from nettop.tui.playback import RECORD_ACTIONS, RECORD_BINDINGS, REPLAY_ACTIONS, REPLAY_BINDINGS
from nettop.tui.record_keys import RecordKeysMixin
from nettop.tui.replay_keys import ReplayKeysMixin
from nettop.tui.screens import HelpScreen, InterfacePicker
from nettop.tui.summary import SummaryBox, SummaryView
from nettop.tui.tables import BqlTable, CpuTable, IfaceTable, LatencyTable, QdiscTable, QueueTable
from nettop.tui.experiment_keys import EXPERIMENT_ACTIONS, EXPERIMENT_BINDINGS, ExperimentMixin
from nettop.tui.trial_bar import TRIAL_BINDINGS, TrialMixin, install_hangup
from nettop.tui.tuning import TUNING_ACTIONS, TUNING_BINDINGS, TuningMixin
from nettop.tui.themes import DEFAULT_THEME, NO_COLOR_THEME, THEME_ORDER, load_themes
from nettop.tui.widgets import EmptyState, KeysFooter, LiveScreen, Panel, PanelsScroll, TextLine

__all__ = ["NettopApp", "NO_LATENCY", "next_interval", "run"]

INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
PANELS = ("queues", "cpus", "throughput", "latency", "qdisc")


def next_interval(current: float, direction: int) -> float:
    """The next step up (+1) or down (-1) the interval ladder from `current`."""
    if direction > 0:
        bigger = [s for s in INTERVAL_STEPS if s > current + 1e-9]
        return bigger[0] if bigger else INTERVAL_STEPS[-1]
    smaller = [s for s in INTERVAL_STEPS if s < current - 1e-9]
    return smaller[-1] if smaller else INTERVAL_STEPS[0]


TERMINAL_CHECK_S = 1.0  # how often the live view asks whether its terminal is still there


def terminal_gone(stream: IO[str] | None) -> bool:
    """Whether the terminal behind `stream` hung up (its pty's other side closed)."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):
        return False
    if fd < 0:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in poller.poll(0))


class NettopApp(ExperimentMixin, DoctorMixin, TrialMixin, TuningMixin, ReplayKeysMixin, RecordKeysMixin, App[None]):
    """The app: layout, data arrival, the view keys. The drawing, the replay and record
    keys, the tuning keys, the doctor's panel and the experiment keys are mixins in their
    own modules (drawing.py, which replay_keys.py and record_keys.py build on, tuning.py,
    doctor_panel.py, experiment_keys.py)."""

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
        Binding("v", "view", "view", tooltip="summary (every figure group on one screen; the default below "
                "120x34) or the full panels"),
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
        *TRIAL_BINDINGS,  # y keeps a change on trial (trial_bar.py)
        *EXPERIMENT_BINDINGS,
        *DOCTOR_BINDINGS,  # the findings panel (doctor_panel.py)
    ]

    def __init__(self, source: Source, window_s: float = 180.0, driver_class: type[Driver] | None = None,
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
        self.view = "auto"  # "summary", "panels", or "auto": the summary on small terminals
        self.latest: Point | None = None
        self.frames = 0  # points drawn: tests check bursts collapse into one frame
        self._own_cpu: float | None = None
        self._chart_key: tuple | None = None
        self._chart_t: float | None = None
        self._latency_events = -1
        self._latency_t: float | None = None
        self._settings_shown = None  # DrawingMixin's: what the source was last told is on screen
        self._summary_chart: tuple[tuple, float] | None = None
        self._drawn_timeline: object = None  # a replay seek replaces the source's Timeline
        self._widget_memo: dict[object, Any] = {}  # DrawingMixin._one
        self._terminal_timer: Timer | None = None  # _check_terminal's, on a terminal
        self._terminal_checked = 0.0  # monotonic time of the last check
        self.replaying = source.mode == "replay"
        self.seeking = 0  # replay moves under way on the worker
        self.record_error: str | None = None  # one line, shown in the notice
        self.recorded: list[RecordStatus] = []  # files written by the record key, for the exit line
        self.init_trials()
        for theme in load_themes().values():
            self.register_theme(theme)
        self.theme = NO_COLOR_THEME if self.no_color else DEFAULT_THEME

    # --- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TextLine("nettop: waiting for the first sample", id="header")
        yield TextLine("", id="notice")
        with SummaryBox(id="summary"):
            yield SummaryView(id="summary-lines")
            yield ThroughputChart(id="summary-chart")
        with PanelsScroll(id="panels", can_focus=False):
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
            yield doctor_panel()  # 7 findings (doctor_panel.py)
        yield from self.compose_experiment()  # the experiment's progress bar, shown while one runs
        yield from self.compose_trial()  # a change on the SSH session's path counting down
        yield KeysFooter(compact=True)

    def get_default_screen(self) -> Screen:
        """The live view's screen: Textual's, with its background's lines kept (LiveScreen)."""
        return LiveScreen(id="_default")

    def on_mount(self) -> None:
        self.query_one("#queues", Panel).set_status("sort: queue")
        self.query_one("#latency-chart").display = False
        self.query_one("#latency-table").display = False
        self.query_one("#cpus-heatmap").display = False
        self.query_one("#notice").display = False
        self.query_one("#experiment-bar").display = False
        self.query_one("#trial-bar").display = False
        self.query_one("#ebpf").display = False  # until probes run or a recording has their figures
        switch = self.source.probe_switch
        if switch is not None:
            switch.changed = lambda: self.post_message(ProbesChanged())
        self.query_one("#queues-table").focus()
        self._apply_layout()
        self.source.start(self._wake)
        if not self.is_headless:
            self._terminal_timer = self.set_interval(TERMINAL_CHECK_S, self._check_terminal)

    def _check_terminal(self) -> None:
        """The terminal went away and no SIGHUP came (nettop in a session of its own, or
        under nohup, when the pty closed): Textual's input thread then spins on the end of
        input at a whole CPU while nothing can be shown, for ever. That is a hang-up: the
        SIGHUP handler (install_hangup) reverts what must be reverted and ends nettop."""
        self._terminal_checked = time.monotonic()
        if terminal_gone(sys.__stdin__):
            os.kill(os.getpid(), signal.SIGHUP)

    def _check_terminal_on_tick(self) -> None:
        """While samples arrive, their frame asks (once per TERMINAL_CHECK_S) and the timer
        starts over, so it only fires when none came for that long (paused, a long
        interval): one wake-up of the app a second fewer."""
        timer = self._terminal_timer
        if timer is None:
            return
        timer.reset()
        if time.monotonic() - self._terminal_checked >= TERMINAL_CHECK_S:
            self._check_terminal()

    def on_resize(self, event: events.Resize) -> None:
        diff = getattr(self._driver, "screen_diff", None)
        if diff is not None:
            diff.invalidate()
        self._apply_layout(event.size)

    @on(SummaryBox.Resized)
    def _on_summary_resized(self) -> None:
        self.redraw()  # the summary's lines are laid out for its size

    # --- summary or panels ---------------------------------------------------------------

    def wants_summary(self, size: Size | None = None) -> bool:
        """The summary below the wide and tall breakpoints (80x24 is an SSH session's
        default), unless the operator chose with `v`. `size`: the terminal's new size
        while a resize is being handled (the app's own is updated after)."""
        if self.view != "auto":
            return self.view == "summary"
        width, height = size or self.size
        return width < self.HORIZONTAL_BREAKPOINTS[1][0] or height < self.VERTICAL_BREAKPOINTS[1][0]

    def summary_shown(self) -> bool:
        return self._one("#summary").display

    def _apply_layout(self, size: Size | None = None) -> None:
        """Show the summary or the panels; a zoomed panel (1-6, z) replaces the summary."""
        show = self.wants_summary(size) and self.zoomed is None
        summary, panels = self.query_one("#summary"), self.query_one("#panels")
        if summary.display == show and panels.display != show:
            return
        summary.display, panels.display = show, not show
        if not show:
            self._chart_key, self._latency_events = None, -1  # charts were not drawn meanwhile
            if self.focused is None:
                self.query_one("#queues-table").focus()
            self.redraw()
        else:  # drawn when the box has its size (SummaryBox.Resized) or now if it has one
            self.redraw()

    def action_view(self) -> None:
        if self.summary_shown():
            self.view = "panels"
        else:
            self.view = "summary"
            if self.zoomed is not None:
                self.action_zoom()
        self._apply_layout()

    def on_unmount(self) -> None:
        if self.experiment is not None:
            self.experiment.stop()  # its thread reverts the running variant; main() waits for it
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
        tap = self.source.tap
        if tap is not None and tap.error is not None and not tap.active:
            self._recording_failed(tap.error)
        self._check_terminal_on_tick()
        own = self.source.own_cpu_percent()  # once per sample, so the % covers one interval
        if own is not None:
            self._own_cpu = own
        with self.batch_update():
            self._draw(point)

    @on(ProbesChanged)
    def _on_probes_changed(self) -> None:
        switch = self.source.probe_switch
        if switch is not None and switch.state == "off" and switch.reason:
            self.notify(f"eBPF off: {switch.reason}", severity="warning", timeout=8)
        elif switch is not None and switch.state == "on":
            self.notify("eBPF probes on", timeout=3)
        self._draw_header()
        if self.latest is not None:
            self._draw_ebpf(self.latest)

    def action_probes(self) -> None:
        switch = self.source.probe_switch
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
            return not self.replaying and self.source.tap is not None
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
            return why if action.split("(")[0] in TUNING_ACTIONS | EXPERIMENT_ACTIONS else None

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
        node: DOMNode | None = self.focused  # climbs to parents: any DOM node, the screen last
        while node is not None:
            if isinstance(node, Panel) and node.id:
                return node.id
            node = node.parent
        return "queues"

    def action_zoom(self) -> None:
        panels = self.query_one("#panels")
        if self.zoomed is not None:
            self.query_one(f"#{self.zoomed}").remove_class("-zoom")
            panels.remove_class("-zoomed")
            self.zoomed = None
            self._apply_layout()  # back to the summary where it was shown
            return
        self.zoomed = self.current_panel()
        self.query_one(f"#{self.zoomed}").add_class("-zoom")
        panels.add_class("-zoomed")
        self._apply_layout()

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
        elif self.zoomed is None and self.summary_shown():  # from the summary: the panel zoomed
            self.zoomed = name
            panel.add_class("-zoom")
            self.query_one("#panels").add_class("-zoomed")
            self._apply_layout()
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

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for b in self.active_bindings_list():
            if b.action in ("quit",):
                continue
            key = b.key_display or b.key.split(",")[0]
            yield SystemCommand(f"nettop: {b.description}", f"key {key}",
                                lambda a=b.action: self.run_action(a))


def _terminal_gone() -> bool:
    """Whether this process's terminal was hung up (sshd closed the session): asking for
    its foreground group then fails with EIO instead of naming one."""
    import sys

    try:
        os.tcgetpgrp(sys.stdin.fileno())
    except (OSError, ValueError):
        return True
    return False


def _revert_overdue_trials() -> None:
    """Trials whose nettop and guardian are both gone, past their deadline: put back now."""
    from nettop.actions.base import ActionError
    from nettop.actions.trial import GUARDIAN_GRACE_S, revert_overdue
    from nettop.actions.tuner import Tuner

    try:
        for trial in revert_overdue(Tuner(), grace=GUARDIAN_GRACE_S):
            print(f"nettop: reverted group {trial.group}: on trial and never confirmed")
    except ActionError:
        pass  # no journal to read, or read-only: nothing of ours to put back


def run(source: Source, revert_on_exit: bool = False) -> int:
    """Run the app on this terminal, sending it only the cells that change.

    With `revert_on_exit`, everything nettop changed is put back when the app exits
    normally; after a kill -9 `nettop restore` does it from the journal.
    """

    from nettop.tui.diffterm import diffing_driver

    no_color = "NO_COLOR" in os.environ  # read before Textual takes it out of the environment
    tuner = None
    if revert_on_exit and source.mode == "live":
        from nettop.actions.tuner import Tuner

        tuner = Tuner()
        tuner.revert_on_exit()
    if source.mode == "live":
        _revert_overdue_trials()
    app = NettopApp(source, driver_class=diffing_driver(no_color), tuner=tuner)
    install_hangup(app, tuner)
    try:
        app.run()
    finally:
        # nettop ends (q, the terminal gone, an error) with a change still counting down:
        # it was not confirmed, so it goes back now rather than at its deadline
        from nettop.actions.trial import active

        pending = active()
        if pending:
            why = ("the session's terminal hung up before it was confirmed" if _terminal_gone()
                   else "nettop was closed before it was confirmed")
            for trial in pending:
                trial.revert(why)
    app.wait_for_experiment()  # closed mid-run: its variant is reverted before nettop exits
    for status in app.recorded:
        print(f"nettop: recorded {status.samples} samples to {status.path}")
    return 0

