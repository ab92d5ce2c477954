"""Tuning from the live view: every action is a `nettop set` command line, prefilled from
the selected queue, checked, confirmed when disruptive, applied off the UI thread.

Why command lines: the operator learns one syntax for the screen and for scripts ("the
same on ALL nodes" is then a copy of what the prompt showed), and every setting nettop
can change is reachable without a form per setting. The queue panel's row gives the
defaults (its IRQ, interface, queue, current masks); `k` opens a CPU mask editor for
RPS/XPS because toggling CPUs is quicker than typing masks. A line is applied by the one
tuning workflow (`nettop.actions.workflow`, as `nettop set` and the doctor's fixes are):
the Tuner validates, writes, reads back, journals and reports each write as a Timeline
event, so the charts mark it;
undo/redo/journal and the before/after comparison work from the same journal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static

from nettop.actions.base import ActionError, Change, Result
from nettop.actions.journal import problem_line
from nettop.actions.workflow import IRQBALANCE_ASK, Outcome, parse_line, run_line
from nettop.output.before_after import KEYS, LABELS, Figures, compare, figures, format_value
from nettop.collectors.cpus import format_cpu_list, format_cpu_mask, parse_cpu_mask
from nettop.model.timeline import Event
from nettop.tui.drawing import DrawingMixin

if TYPE_CHECKING:
    from nettop.actions.trial import Guard, TrialRun
    from nettop.actions.tuner import Tuner
    from nettop.tui.model import QueueRow
    from nettop.tui.screens import Prompt

BEFORE_AFTER_S = 30.0  # seconds compared on each side of a change in the live view


def parse_set(text: str) -> list[Change]:
    """The Changes of one `set ...` line ("set" may be left out); ActionError otherwise.
    The prompts check a line with it; applying goes through `workflow.run_line`."""
    return parse_line(text)


def mask_bits(mask: str | None) -> int | None:
    """The width of a mask as the kernel prints it (sized by nr_cpu_ids): a new mask
    written the same width, without reading sysfs on the UI thread."""
    digits = sum(1 for c in mask or "" if c != ",")
    return 4 * digits or None


def cpus_of_mask(mask: str | None) -> set[int]:
    if not mask:
        return set()
    try:
        return set(parse_cpu_mask(mask))
    except ValueError:
        return set()


def default_command(action: str, row: QueueRow | None, cpus: Sequence[int]) -> str:
    """The prefilled command line of a key, from the selected queue row."""
    every = format_cpu_list(cpus) if cpus else "0"
    if row is None:
        return {"affinity": "irq IRQ CPUS", "spread": f"irq IFACE spread {every}"}.get(action, "")
    if action == "affinity":
        cur = format_cpu_list(row.affinity) if row.affinity else every
        return f"irq {row.irqs[0]} {cur}" if row.irqs else "irq IRQ CPUS"  # software queues have none
    if action == "spread":
        return f"irq {row.ifname} spread {every}"
    if action == "coalesce":
        return f"coalesce {row.ifname} "
    if action == "qdisc":
        return f"qdisc {row.ifname} fq_codel"
    return ""


class ConfirmScreen(ModalScreen["str | None"]):
    """Disruptive changes ask first: y applies, n or escape cancels. When irqbalance runs
    and IRQs move, b applies and bans them from irqbalance through its socket, so it does
    not move them back seconds later."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer('yes')", "apply"),
                                         Binding("b", "answer('ban')", "apply + ban", show=False),
                                         Binding("n,escape", "answer(None)", "cancel")]

    def __init__(self, lines: Sequence[str], allow_ban: bool = False) -> None:
        super().__init__(id="confirm")
        self._lines = list(lines)
        self.allow_ban = allow_ban

    def compose(self) -> ComposeResult:
        keys = "y applies, n or escape cancels"
        if self.allow_ban:
            keys = "y applies · b applies and bans the IRQs from irqbalance · n or escape cancels"
        with Vertical(id="confirm-box"):
            yield Static("\n".join(self._lines), id="confirm-text")
            yield Static(keys, id="confirm-keys")

    def action_answer(self, answer: str | None) -> None:
        if answer == "ban" and not self.allow_ban:
            return
        self.dismiss(answer)


class MaskEditor(ModalScreen["str | None"]):
    """Toggle the CPUs of an RPS or XPS mask: 0-9 toggle those CPUs, left/right and space
    for any CPU, f all, c none, * this queue or all rx queues (RPS); enter applies."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "apply", "apply", priority=True), Binding("escape", "cancel", "cancel"),
        Binding("left", "move(-1)", show=False), Binding("right", "move(1)", show=False),
        Binding("space", "toggle_cursor", show=False), Binding("f", "fill", "all CPUs"),
        Binding("c", "clear", "none"), Binding("asterisk", "all_queues", "all queues"),
        *(Binding(str(d), f"toggle_cpu({d})", show=False) for d in range(10)),
    ]

    def __init__(self, what: str, ifname: str, queue: int, cpus: Sequence[int], chosen: set[int],
                 ncpus: int | None = None) -> None:
        super().__init__(id="mask-editor")
        self.what, self.ifname, self.queue = what, ifname, queue
        self.cpus = list(cpus)
        # masks as sysfs prints them (32-bit comma groups), sized like the queue's own mask
        # (the kernel's CPU ids); without one, by the online CPUs the snapshot lists
        self.ncpus = max(ncpus or 0, max(self.cpus, default=0) + 1)
        self.chosen = set(chosen) & set(self.cpus)
        self.cursor = 0
        self.all_queues = False

    def compose(self) -> ComposeResult:
        with Vertical(id="mask-box"):
            yield Static("", id="mask-title")
            yield Static("", id="mask-grid")
            yield Static("0-9 / space toggle · ←→ move · f all · c none · * all queues · enter apply · esc cancel",
                         id="mask-keys")

    def on_mount(self) -> None:
        self._draw()

    def command(self) -> str:
        queue = "all" if self.all_queues else str(self.queue)
        # "0x": a bare "2" would be read as the CPU list "2", not the mask of CPU 1
        return f"{self.what} {self.ifname} {queue} 0x{self.mask()}"

    def mask(self) -> str:
        return format_cpu_mask(self.chosen, self.ncpus)

    def _draw(self) -> None:
        where = "every rx queue" if self.all_queues else f"{'rx' if self.what == 'rps' else 'tx'}-{self.queue}"
        chosen = format_cpu_list(sorted(self.chosen)) if self.chosen else "none (off)"
        self.query_one("#mask-title", Static).update(
            f"{self.what}_cpus of {self.ifname} {where}: CPUs {chosen} = mask {self.mask()}")
        grid = Text()
        for i, cpu in enumerate(self.cpus):
            mark = "■" if cpu in self.chosen else "·"
            grid.append(f"{cpu:>3}{mark}", style="reverse" if i == self.cursor else "")
            if i % 16 == 15:
                grid.append("\n")
        self.query_one("#mask-grid", Static).update(grid)

    def action_toggle_cpu(self, cpu: int) -> None:
        if cpu in self.cpus:
            self.chosen ^= {cpu}
            self._draw()

    def action_toggle_cursor(self) -> None:
        if self.cpus:
            self.action_toggle_cpu(self.cpus[self.cursor])

    def action_move(self, step: int) -> None:
        if self.cpus:
            self.cursor = (self.cursor + step) % len(self.cpus)
            self._draw()

    def action_fill(self) -> None:
        self.chosen = set(self.cpus)
        self._draw()

    def action_clear(self) -> None:
        self.chosen = set()
        self._draw()

    def action_all_queues(self) -> None:
        if self.what == "rps":
            self.all_queues = not self.all_queues
            self._draw()

    def action_apply(self) -> None:
        self.dismiss(self.command())

    def action_cancel(self) -> None:
        self.dismiss(None)


class JournalScreen(ModalScreen[None]):
    """The tuning journal, newest last: up/down pick, b compares before/after, x reverts
    everything nettop changed in this journal, escape closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,j,q", "close", "close"), Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False), Binding("b", "before_after", "before/after"),
        Binding("x", "revert_all", "revert all"),
    ]

    def __init__(self, lines: Sequence[tuple[float, str]], on_compare: Callable[[float, str], None],
                 on_revert: Callable[[], None], drift: Sequence[str] = (),
                 skipped: str | None = None) -> None:
        super().__init__(id="journal")
        self.lines = list(lines)
        self.cursor = max(0, len(self.lines) - 1)
        self._on_compare, self._on_revert = on_compare, on_revert
        self._drift = list(drift)
        self._skipped = skipped  # the journal's unreadable lines, one warning line

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="journal-box"):
            yield Static("", id="journal-list")
            yield Static("\n".join(f"drift: {d}" for d in self._drift), id="journal-drift")
            yield Static(f"⚠ {self._skipped}" if self._skipped else "", id="journal-skipped")
            yield Static("↑↓ pick · b before/after · x revert all · esc close", id="journal-keys")

    def on_mount(self) -> None:
        self.query_one("#journal-drift").display = bool(self._drift)
        self.query_one("#journal-skipped").display = bool(self._skipped)
        self._draw()

    def _draw(self) -> None:
        text = Text()
        if not self.lines:
            text.append("no changes yet")
        for i, (_, line) in enumerate(self.lines):
            text.append(line + "\n", style="reverse" if i == self.cursor else "")
        self.query_one("#journal-list", Static).update(text)

    def action_move(self, step: int) -> None:
        if self.lines:
            self.cursor = max(0, min(len(self.lines) - 1, self.cursor + step))
            self._draw()

    def action_before_after(self) -> None:
        if self.lines:
            t, line = self.lines[self.cursor]
            self._on_compare(t, line)

    def action_revert_all(self) -> None:
        self.dismiss(None)
        self._on_revert()

    def action_close(self) -> None:
        self.dismiss(None)


class BeforeAfterScreen(ModalScreen[None]):
    """The seconds before a change next to the seconds after it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,b,q", "close", "close")]

    def __init__(self, title: str, rows: Sequence[tuple[str, str, str, str]], note: str) -> None:
        super().__init__(id="before-after")
        self._title, self._rows, self._note = title, list(rows), note

    def compose(self) -> ComposeResult:
        with Vertical(id="ba-box"):
            yield Static(self._title, id="ba-title")
            text = Text()
            text.append(f"{'':<22}{'before':>16}{'after':>16}{'change':>9}\n", style="bold")
            for label, before, after, change in self._rows:
                text.append(f"{label:<22}{before:>16}{after:>16}{change:>9}\n")
            yield Static(text, id="ba-table")
            yield Static(self._note, id="ba-note")

    def action_close(self) -> None:
        self.dismiss(None)


def before_after_rows(points: Sequence[Any], t_wall: float, window_s: float) -> tuple[list[tuple[str, str, str, str]], str]:
    """Rows of the before/after screen from timeline points (or the Figures a timeline's
    digest already made of them), and a note on the windows."""
    series = [p if isinstance(p, Figures) else figures(p.snapshot, p.rates) for p in points
              if isinstance(p, Figures) or p.rates is not None]
    c = compare(series, t_wall, window_s)
    rows = []
    for key in KEYS:
        pct = c.change_pct(key)
        rows.append((LABELS[key], format_value(key, c.before[key]), format_value(key, c.after[key]),
                     "–" if pct is None else f"{pct:+.0f}%"))
    note = (f"averages of {c.n_before} intervals before and {c.n_after} after "
            f"(up to {window_s:g} s each side; RTT: worst)")
    if c.n_after == 0:
        note += " · no interval after the change yet: wait a few seconds and press b again"
    return rows, note


class Tuned(Message):
    """A `set` line's Outcome, posted by the tuning worker; the UI asks or shows it."""

    def __init__(self, text: str, outcome: Outcome, warnings: list[str]) -> None:
        super().__init__()
        self.text = text
        self.outcome = outcome
        self.warnings = warnings  # the journal's skipped lines, said once


TUNING_BINDINGS = [
    Binding("a", "tune('affinity')", "affinity", show=False,
            tooltip="move the selected queue's IRQ to a CPU list or mask (shows requested and effective)"),
    Binding("A", "tune('spread')", "spread", show=False,
            tooltip="spread the interface's queue IRQs one per CPU (or `hint`, `numa` instead of spread)"),
    Binding("k", "mask_editor", "RPS/XPS", show=False,
            tooltip="RPS (rx queue) or XPS (tx queue) mask editor for the selected queue"),
    Binding("c", "tune('coalesce')", "coalesce", show=False,
            tooltip="interrupt coalescing of the selected interface (only what its driver offers)"),
    Binding("d", "tune('qdisc')", "qdisc", show=False,
            tooltip="replace the root qdisc: pfifo_fast fq_codel fq cake pfifo bfifo tbf mq [children=KIND] KEY=VALUE... [child.KEY=VALUE...]"),
    Binding("o", "tune('other')", "set…", show=False,
            tooltip="any `nettop set` command: txqueuelen mtu bql rings channels features rfs sysctl ..."),
    Binding("u", "undo", "undo", show=False, tooltip="undo the last tuning change"),
    Binding("U", "redo", "redo", show=False, tooltip="redo the last undone tuning change"),
    Binding("j", "journal", "journal", show=False,
            tooltip="the tuning journal: pick a change, b before/after, x revert all"),
    Binding("b", "before_after", "before/after", show=False,
            tooltip="compare the seconds before and after the newest tuning change"),
]
TUNING_ACTIONS = frozenset({"tune", "mask_editor", "undo", "redo", "journal", "before_after"})


class TuningMixin(DrawingMixin):
    """The app's tuning keys: they ask (prompt, mask editor, confirm screen) and show; the
    change itself is `nettop.actions.workflow.run_line` on a worker, which posts back the
    Outcome. Needs from the app: `tuner` (or makes one) and the drawing state."""

    tuner: Tuner | None
    _journal_said: tuple[str, ...] = ()  # the skipped journal lines already warned about

    def experiment_disabled(self) -> str | None:
        """Why a running experiment refuses hand-made changes; ExperimentMixin says when."""
        return None

    def tuning_guard(self) -> Guard | None:
        """How a change on the SSH session's path is protected; TrialMixin says how."""
        return None

    def start_trial(self, run: TrialRun) -> None:
        """Count a change on trial down; TrialMixin does (the bar, `y`)."""
        run.revert("this screen cannot count a trial down")

    def _journal_skipped(self, tuner: Tuner) -> str | None:
        """The journal's unreadable lines (torn by a crash, edited by hand) as the CLI's one
        warning line, None when every line reads; from now on they count as said."""
        problems = tuple(tuner.journal.problems)
        if not problems:
            return None
        self._journal_said = problems
        return problem_line(tuner.journal.path, list(problems))

    def _journal_warning(self, tuner: Tuner) -> list[str]:
        """That line once per set of such lines, not on every key, since the live view runs
        many commands over one journal; the journal screen always shows it."""
        if tuple(tuner.journal.problems) == self._journal_said:
            return []
        line = self._journal_skipped(tuner)
        return [line] if line else []

    def tuning_disabled(self) -> str | None:
        if self.replaying:
            return "replay: tuning is disabled (this is a recording)"
        running = self.experiment_disabled()
        if running:
            return running
        tuner = self.get_tuner()
        if tuner is None:
            return "tuning is not available here"
        if tuner.read_only:
            return tuner.read_only
        if self.source.mode != "live":
            return "this view reads a captured /proc + /sys tree, not this kernel: nothing to tune here"
        return None

    def get_tuner(self) -> Tuner | None:
        if self.tuner is None and not self.replaying:
            from nettop.actions.tuner import Tuner

            self.tuner = Tuner()
        if self.tuner is not None and self.tuner.on_event is None:
            self.tuner.on_event = self._tuning_event
        return self.tuner

    def _tuning_event(self, event: Event) -> None:
        self.source.timeline.add_event(event)

    def _refuse(self) -> bool:
        why = self.tuning_disabled()
        if why:
            self.notify(why, severity="warning", timeout=6)
            return True
        return False

    def _online(self) -> list[int]:
        latest = self.latest
        return list(latest.snapshot.online_cpus) if latest is not None else []

    def action_tune(self, action: str) -> None:
        if self._refuse():
            return
        from nettop.tui.screens import Prompt

        row = self.selected_queue()
        text = default_command(action, row, self._online())
        hint = {"qdisc": "pfifo_fast fq_codel fq cake pfifo bfifo tbf mq; e.g. tbf rate=1gbit burst=32k"}
        if action == "coalesce" and row is not None:
            hint["coalesce"] = f"reading what {row.ifname}'s driver offers…"
        title = f"nettop set … ({hint[action]})" if hint.get(action) else "nettop set …"
        prompt = Prompt(title, text, "e.g. rps eth0 0 0-3", check=check_line, id="tune-prompt")
        self.push_screen(prompt, callback=self._tune_answer)
        if action == "coalesce" and row is not None:
            self._coalesce_hint(prompt, row.ifname)

    def _tune_answer(self, answer: str | None) -> None:
        if answer:
            self.run_tuning(answer)

    @work(thread=True, group="hint", exit_on_error=False)
    def _coalesce_hint(self, prompt: Prompt, ifname: str) -> None:
        """Fill the prompt's title with the driver's coalescing, read over ethtool netlink
        on a worker: a driver holding the RTNL lock must not freeze the screen."""
        from nettop.actions.ethtool import offered

        try:
            cur = offered("coalesce", ifname)
            hint = "now " + " ".join(f"{k}={'on' if v is True else 'off' if v is False else v}"
                                     for k, v in cur.items())
        except ActionError as exc:
            hint = str(exc)
        self.call_from_thread(prompt.set_title, f"nettop set … ({hint})")

    def action_mask_editor(self) -> None:
        if self._refuse():
            return
        row = self.selected_queue()
        if row is None:
            self.notify("select a queue in the queues panel first (1, then ↑↓)", timeout=5)
            return
        what = "xps" if row.kind == "tx" else "rps"
        current = row.xps if what == "xps" else row.rps
        self.push_screen(MaskEditor(what, row.ifname, row.index, self._online(), cpus_of_mask(current),
                                    mask_bits(row.rps or row.xps)),
                         callback=self._tune_answer)

    @work(thread=True, group="tuning", exit_on_error=False)
    def run_tuning(self, text: str, confirmed: bool = False, ban: bool = False) -> None:
        """One `set` line through the workflow on a worker thread; the Outcome comes back
        to the UI thread, which asks (confirm screen) or shows (notices)."""
        tuner = self.get_tuner()
        assert tuner is not None  # the keys are refused without one
        outcome = run_line(tuner, text, confirmed=confirmed, ban=ban, ask=True, guard=self.tuning_guard())
        self.post_message(Tuned(text, outcome, self._journal_warning(tuner) if outcome.results else []))

    def on_tuned(self, message: Tuned) -> None:
        """The worker's Outcome on the UI thread (found by name: a mixin is not a
        MessagePump, so `@on` would not register here)."""
        text, outcome, warnings = message.text, message.outcome, message.warnings
        if outcome.error is not None:
            self.notify(outcome.error, severity="error", timeout=10)
        elif outcome.pending:
            self._ask(text, outcome)
        else:
            ban = outcome.ban_line()
            self._applied(list(outcome.results), warnings + ([ban] if ban else []) + list(outcome.warnings))
            if outcome.trial is not None:
                self.start_trial(outcome.trial)

    def _ask(self, text: str, outcome: Outcome) -> None:
        lines = outcome.plan_lines() + [f"⚠ {p.confirm}" for p in outcome.plans if p.confirm]
        if outcome.may_ban:
            lines.append(f"⚠ {IRQBALANCE_ASK}")

        def answered(answer: str | None) -> None:
            if answer:
                self.run_tuning(text, confirmed=True, ban=answer == "ban")

        self.push_screen(ConfirmScreen(lines, allow_ban=outcome.may_ban), callback=answered)

    def _applied(self, results: list[Result], warnings: list[str]) -> None:
        for r in results:
            ok = r.verified and not r.error
            self.notify(r.line(), severity="information" if ok else "warning", timeout=8)
        for w in warnings:
            self.notify(w, severity="warning", timeout=10)
        self.redraw()

    def action_undo(self) -> None:
        if not self._refuse():
            self._step("undo")

    def action_redo(self) -> None:
        if not self._refuse():
            self._step("redo")

    @work(thread=True, group="tuning", exit_on_error=False)
    def _step(self, which: str) -> None:
        tuner = self.get_tuner()
        assert tuner is not None
        try:
            results = tuner.undo() if which == "undo" else tuner.redo()
        except ActionError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.call_from_thread(self._applied, results, self._journal_warning(tuner))
        if not results:
            self.call_from_thread(self.notify, f"nothing to {which}", timeout=4)

    def _revert_unless_refused(self) -> None:
        """The journal screen's "revert all": nothing in replay or read-only mode."""
        if not self._refuse():
            self._revert_all()

    @work(thread=True, group="tuning", exit_on_error=False)
    def _revert_all(self) -> None:
        tuner = self.get_tuner()
        assert tuner is not None
        try:
            results = tuner.revert_all()
        except ActionError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.call_from_thread(self._applied, results,
                              self._journal_warning(tuner) + [f"skipped: {s}" for s in tuner.skipped])

    def _tuning_events(self) -> list[Event]:
        return [e for e in self.source.timeline.events() if e.kind == "tuning"]

    def action_journal(self) -> None:
        self._open_journal(self.replaying)

    @work(thread=True, group="tuning", exit_on_error=False)
    def _open_journal(self, replaying: bool) -> None:
        """Reading back what nettop set (for drift) touches the kernel, and pyroute2's
        blocking calls run their own event loop: so off the UI thread, like every write."""
        events = [(e.t_wall, e.text) for e in self._tuning_events()]
        drift: list[str] = []
        skipped = None
        tuner = None if replaying else self.get_tuner()
        if tuner is not None and not tuner.read_only:
            try:
                drift = [d.line() for d in tuner.drift()]  # reads the journal: its problems are fresh
            except ActionError as exc:
                drift = [str(exc)]
            skipped = self._journal_skipped(tuner)
        screen = JournalScreen(events, self._show_before_after,
                               self._revert_unless_refused, drift, skipped)
        self.call_from_thread(self.push_screen, screen)

    def action_before_after(self) -> None:
        events = self._tuning_events()
        if not events:
            self.notify("no tuning change on the timeline yet", timeout=4)
            return
        self._show_before_after(events[-1].t_wall, events[-1].text)

    def _show_before_after(self, t_wall: float, text: str) -> None:
        tl = self.source.timeline
        rows, note = before_after_rows(tl.digests() if tl.digest is not None else tl.points(), t_wall, BEFORE_AFTER_S)
        self.push_screen(BeforeAfterScreen(text, rows, note))


def check_line(answer: str) -> str | None:
    """A prompt's check of a `set` line: None when it parses, else the one line why not."""
    try:
        parse_set(answer)
    except ActionError as exc:
        return str(exc)
    except ValueError as exc:
        return f"cannot read that line: {exc}"
    return None


__all__ = ["BeforeAfterScreen", "ConfirmScreen", "JournalScreen", "MaskEditor", "TUNING_ACTIONS", "TUNING_BINDINGS",
           "Tuned", "TuningMixin", "before_after_rows", "check_line", "default_command", "mask_bits", "parse_set"]
