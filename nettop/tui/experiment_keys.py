"""The live view's experiment key: `X` runs an experiment plan (docs/experiments.md) while
the panels keep showing the host, with a one-line progress bar under them.

Why from the live view: the point of an experiment is the effect, and the panels show
each variant's IRQ rates, softirq load and RTT as it runs; the tuning markers land on
the charts. The run is the same `Runner` as `nettop experiment`, on the app's own Tuner
(one journal), on a worker thread. `X` again stops it: the running variant is reverted
before the run ends; quitting does the same. Tuning keys are refused while it runs, so
a hand-made change cannot be mistaken for a variant's effect. The table opens when the
run ends and is written to the same files the command writes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from nettop.tui.screens import Prompt
from nettop.tui.tuning import ConfirmScreen, TuningMixin
from nettop.tui.widgets import TextLine

if TYPE_CHECKING:
    from nettop.experiment.plan import ExperimentPlan
    from nettop.experiment.runner import Progress, Runner

EXPERIMENT_BINDINGS = [
    Binding("X", "experiment", "experiment", show=False,
            tooltip="run an experiment plan under load (docs/experiments.md) with a progress bar; "
                    "X again stops it and reverts the running variant"),
]
EXPERIMENT_ACTIONS = frozenset({"experiment"})
EXAMPLE = os.path.join("docs", "examples", "lab-queues.toml")
BAR_WIDTH = 20


class _Quiet(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise ValueError((message or "").strip() or "see `nettop experiment --help`")


def parse_command(text: str) -> tuple[ExperimentPlan, str]:
    """(the plan with the line's overrides, output directory) from a line such as
    `PLAN.toml --iface eth0 --target 10.0.0.2` (`nettop experiment` may lead);
    PlanError or ValueError with one line otherwise."""
    from nettop.experiment import cli as experiment_cli
    from nettop.experiment import plan as planmod

    words = shlex.split(text)
    if words[:1] == ["nettop"]:
        words = words[1:]
    if words[:1] == ["experiment"]:
        words = words[1:]
    if not words:
        raise ValueError("give a plan: PLAN.toml [--iface IFACE] [--target HOST] [--duration S] [-o DIR]")
    parser = _Quiet(prog="nettop", add_help=False)
    experiment_cli.add_subcommands(parser.add_subparsers(dest="command", parser_class=_Quiet))
    args = parser.parse_args(["experiment", *words])
    plan = planmod.load(args.plan).with_overrides(args.exp_iface, args.target, args.duration)
    out = args.exp_output or f"experiment-{time.strftime('%Y%m%d-%H%M%S')}"
    return plan, out


def bar_text(done: int, total: int, current: str, width: int = BAR_WIDTH, rtt: str = "") -> str:
    """`experiment ██████░░░░ 3/8 long #1: load on · rtt 21/160 ms · X stops`: what the bar
    line shows; rtt is the probe target's p50/p99 over the last sample."""
    filled = round(width * done / total) if total else 0
    live = f" · {rtt}" if rtt else ""
    return f"experiment {'█' * filled}{'░' * (width - filled)} {done}/{total} {current}{live} · X stops"


def fitted_bar(done: int, total: int, current: str, rtt: str, columns: int, longest: str = "") -> str:
    """bar_text with the bar shrunk (down to 4 cells) so that the line fits `columns`:
    at 80 columns a long variant name and its live RTT still leave "X stops" on screen.
    Sized for `longest` (the longest phase text) and a four-digit RTT, so the bar keeps
    one length through the run instead of jumping with each phase's name."""
    widest = max(current, longest, key=len)
    rest = len(bar_text(total, total, widest, 0, "rtt 0000/0000 ms"))
    return bar_text(done, total, current, max(4, min(BAR_WIDTH, columns - 2 - rest)), rtt)


def estimate_s(plan: ExperimentPlan) -> float:
    """Seconds the run should take: each phase's windows plus about a second to apply and revert."""
    t = plan.timing
    return len(plan.variants) * t.repeats * (t.idle + t.warmup + t.measure + 1.0)


class ResultScreen(ModalScreen[None]):
    """The experiment's table sized to the terminal (medians; the files hold every figure
    with its spread), and where the files went."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "close", "close")]

    def __init__(self, title: str, rows: Sequence[Any], note: str) -> None:
        super().__init__(id="experiment-result")
        self._title, self._rows, self._note = title, list(rows), note

    def compose(self) -> ComposeResult:
        from nettop.experiment.table import screen_table

        width = min(114, self.app.size.width - 4)  # the box's border and padding
        with Vertical(id="result-box"):
            yield Static(Text(self._title), id="result-title")
            with VerticalScroll(id="result-scroll"):
                yield Static(Text(screen_table(self._rows, width)), id="result-table")
            yield Static(self._note, id="result-note")

    def action_close(self) -> None:
        self.dismiss(None)


class ExperimentMixin(TuningMixin):
    """The experiment key: the run uses the tuning keys' Tuner and refuses them while it runs."""

    experiment: Runner | None = None  # the running one
    _experiment_ended: threading.Event | None = None  # set when the worker has reverted and returned

    def compose_experiment(self) -> ComposeResult:
        yield TextLine("", id="experiment-bar")

    def experiment_disabled(self) -> str | None:
        return "an experiment is running: X stops it" if self.experiment is not None else None

    def action_experiment(self) -> None:
        if self.experiment is not None:
            self.experiment.stop()
            self.notify("stopping the experiment: reverting the running variant…", timeout=5)
            self._set_bar("experiment stopping: reverting the running variant…")
            return
        why = self.tuning_disabled()
        if why:
            self.notify(why, severity="warning", timeout=6)
            return
        self.push_screen(
            Prompt("nettop experiment PLAN.toml [--iface IFACE] [--target HOST] [--duration S] [-o DIR]",
                   self._default_command(), "PLAN.toml --iface eth0 --target 192.0.2.2",
                   check=self._check_command, id="experiment-prompt"),
            callback=self._confirm)

    def _default_command(self) -> str:
        row = self.selected_queue()
        latest = self.latest
        iface = row.ifname if row is not None else \
            (sorted(latest.snapshot.links)[0] if latest is not None and latest.snapshot.links else "")
        plan = EXAMPLE if os.path.exists(EXAMPLE) else "PLAN.toml"
        return f"{plan} --iface {iface}" if iface else plan

    @staticmethod
    def _check_command(answer: str) -> str | None:
        from nettop.experiment.plan import PlanError

        try:
            parse_command(answer)
        except (PlanError, ValueError) as exc:
            return str(exc)
        return None

    def _confirm(self, answer: str | None) -> None:
        if not answer:
            return
        plan, out = parse_command(answer)
        lines = [f"run the experiment {plan.name!r} on {plan.iface}: {len(plan.variants)} variants "
                 f"(baseline included) x {plan.timing.repeats} repeats, about {estimate_s(plan):.0f} s"]
        shown = plan.variants[:8]  # the box fits 80x24; the plan file has the rest
        lines += [f"  {v.name}: {'; '.join(v.lines) or 'the host as found'}" for v in shown]
        if len(plan.variants) > len(shown):
            lines.append(f"  … and {len(plan.variants) - len(shown)} more (see the plan)")
        lines += [f"load: {plan.load.kind} against {plan.target or 'the plan command'}; results in {out}/",
                  "⚠ each variant is applied through the journal, measured under load and reverted; "
                  "X stops the run and reverts the running variant"]
        def answered(ok: str | None) -> None:
            if ok:
                self._start(plan, out)

        self.push_screen(ConfirmScreen(lines), callback=answered)

    def _start(self, plan: ExperimentPlan, out: str) -> None:
        from nettop.experiment.runner import Runner

        why = self.tuning_disabled()
        if why:  # another experiment began while this one was being confirmed
            self.notify(why, severity="warning", timeout=6)
            return

        longest = max((f"{v.name} #{plan.timing.repeats}: load on" for v in plan.variants), key=len, default="")

        def progress(p: Progress) -> None:
            columns = self.size.width
            self._ui(self._set_bar, fitted_bar(p.done, p.total, p.current, p.rtt, columns, longest))

        # made here, on the UI thread, so that X stops it from the first moment on
        self.experiment = Runner(plan, self.get_tuner(), os.path.join(out, "run.nettop"), progress)
        self._experiment_ended = threading.Event()
        self._set_bar(bar_text(0, self.experiment.progress.total, "checking the plan against the host"))
        self._run_experiment(self.experiment, out)

    @work(thread=True, group="experiment", exit_on_error=False)
    def _run_experiment(self, runner: Runner, out: str) -> None:
        from nettop.actions.base import ActionError
        from nettop.experiment import plan as planmod
        from nettop.experiment.cli import write_outputs
        from nettop.experiment.load import LoadError
        from nettop.experiment.runner import Stopped
        from nettop.record.store import RecordingError

        plan = runner.plan
        ended = self._experiment_ended
        try:
            planmod.validate(plan, runner.tuner)
            runner.tuner.check_writable()
            os.makedirs(out, exist_ok=True)
            phases = runner.run()
            result = write_outputs(plan.name, phases, out)
        except Stopped as exc:
            self._ui(self.notify, f"experiment {exc}", severity="warning", timeout=8)
            return
        except (planmod.PlanError, ActionError, LoadError, RecordingError, OSError) as exc:
            self._ui(self.notify, f"experiment: {exc}", severity="error", timeout=10)
            return
        finally:
            self.experiment = None
            if ended is not None:
                ended.set()
            self._ui(self._set_bar, "")
        note = f"wrote {result.summary} · escape closes"
        if result.failed:
            note = "a variant failed (see its row) · " + note
        self._ui(self.push_screen, ResultScreen(plan.name, result.rows, note))

    def _ui(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        """Run `fn` on the UI thread; nothing once the app has closed (the run still reverts)."""
        try:
            self.call_from_thread(fn, *args, **kwargs)
        except RuntimeError:
            pass

    def _set_bar(self, text: str) -> None:
        bar = self.query_one("#experiment-bar", TextLine)
        bar.set(text)
        bar.display = bool(text)

    async def action_quit(self) -> None:
        """Quit; a running experiment is stopped first and its variant reverted."""
        runner, ended = self.experiment, self._experiment_ended
        if runner is not None:
            runner.stop()
            self._set_bar("experiment stopping: reverting the running variant before quitting…")
            if ended is not None:
                await asyncio.to_thread(ended.wait, 60)
        await super().action_quit()

    def wait_for_experiment(self, timeout: float = 60) -> None:
        """After the app has closed by any other way: stop the run and wait for its revert."""
        if self.experiment is not None:
            self.experiment.stop()
        if self.experiment is not None and self._experiment_ended is not None:
            self._experiment_ended.wait(timeout)


__all__ = ["EXPERIMENT_ACTIONS", "EXPERIMENT_BINDINGS", "ExperimentMixin", "ResultScreen", "bar_text",
           "estimate_s", "parse_command"]
