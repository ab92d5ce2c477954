"""The live view's side of changes on trial: the countdown bar, `y`, and the revert.

A change on the SSH session's own path comes back from the workflow applied on trial
(`Outcome.trial`). The bar under the panels counts down ("keep qdisc eth0 → tbf? y keeps
· reverts in 27 s"); only `y` keeps it. When the countdown ends the change is reverted
on a worker and the bar says so for a while, so an operator whose session froze and came
back reads what happened. A hang-up or SIGTERM meanwhile is handled in `install_hangup`,
and a nettop that is killed leaves it to the guardian (nettop.actions.trial).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Iterator

from textual import work
from textual.binding import Binding
from textual.timer import Timer

from nettop.actions.trial import DEFAULT_SECONDS, Guard, TrialRun, install_exit_revert
from nettop.tui.tuning import TuningMixin
from nettop.tui.widgets import TextLine

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel
    from textual.widget import Widget

    from nettop.actions.tuner import Tuner

TRIAL_BINDINGS = [
    Binding("y", "trial_keep", "keep", show=False,
            tooltip="keep the change on trial (a change on this SSH session's path reverts unless kept)"),
]
TRIAL_ACTIONS = frozenset({"trial_keep"})
SHOW_ENDED_S = 30.0  # how long the bar says what became of a trial
EXIT_GRACE_S = 5.0  # after SIGTERM, the screen closes within this or the process ends anyway


class TrialMixin(TuningMixin):
    """Counts the app's trials down and keeps or reverts them."""

    _trials: list[TrialRun]
    _trial_timer: Timer | None = None
    _trial_said: tuple[str, float] | None = None  # the last outcome shown, and since when
    _trial_reverting: set[int]  # groups whose countdown ended and whose revert is under way

    def init_trials(self) -> None:
        """The app's __init__ calls this: no trial is counting down when it starts."""
        self._trials, self._trial_reverting = [], set()

    def compose_trial(self) -> Iterator[Widget]:
        yield TextLine("", id="trial-bar")

    def tuning_guard(self) -> Guard | None:
        """The session's path and what serves it in the newest sample: a change on it is
        applied on trial for DEFAULT_SECONDS unless its line says --confirm."""
        from nettop.collectors.session_path import resources

        path = self.source.session()
        if path is None:
            return None
        latest = self.latest
        res = resources(path, latest.snapshot) if latest is not None else None
        return Guard(path, res, None, DEFAULT_SECONDS)

    def start_trial(self, run: TrialRun) -> None:
        self._trials.append(run)
        if self._trial_timer is None:
            self._trial_timer = self.set_interval(0.25, self._trial_tick)
        self._trial_tick()

    def _trial_tick(self) -> None:
        bar = self.query_one("#trial-bar", TextLine)
        runs = [r for r in self._trials if r.outcome is None]
        for r in runs:
            if r.seconds_left() <= 0 and r.group not in self._trial_reverting:
                self._trial_reverting.add(r.group)
                self._trial_revert(r, f"not confirmed within {round(r.trial.deadline - r.trial.t)} s")
        if runs:
            r = runs[0]
            what = "; ".join(x.text for x in r.results) or "the change"
            tail = f"? y keeps · reverts in {int(r.seconds_left() + 0.999)} s"
            room = max(10, self.size.width - len(tail) - 8)
            what = what if len(what) <= room else what[:room - 1] + "…"
            bar.set(f"◆ keep {what}{tail}" + (f" (+{len(runs) - 1} more)" if len(runs) > 1 else ""))
            bar.display = True
            return
        said = self._trial_said
        if said is not None and time.monotonic() - said[1] < SHOW_ENDED_S:
            bar.set(said[0])
            bar.display = True
            return
        bar.display = False
        self._trials = [r for r in self._trials if r.outcome is None]
        if self._trial_timer is not None and not self._trials:
            self._trial_timer.stop()
            self._trial_timer = None

    def action_trial_keep(self) -> None:
        runs = [r for r in self._trials if r.outcome is None]
        if not runs:
            self.notify("no change is on trial", timeout=3)
            return
        self._trial_confirm(runs[0])

    @work(thread=True, group="trial", exit_on_error=False)
    def _trial_confirm(self, run: TrialRun) -> None:
        kept = run.confirm()
        what = "; ".join(x.text for x in run.results) or "the change"
        text = f"◆ {what}: kept" if kept else f"◆ {what}: {run.message}"
        self.call_from_thread(self._trial_ended, text, "information" if kept else "warning")

    @work(thread=True, group="trial", exit_on_error=False)
    def _trial_revert(self, run: TrialRun, reason: str) -> None:
        run.revert(reason)
        what = "; ".join(x.text for x in run.results) or "the change"
        self.call_from_thread(self._trial_ended, f"◆ {what}: {run.message or 'reverted'}", "warning")

    def _trial_ended(self, text: str, severity: SeverityLevel) -> None:
        self._trial_said = (text, time.monotonic())
        self.notify(text, severity=severity, timeout=SHOW_ENDED_S)
        self._trial_tick()
        self.redraw()


def install_hangup(app: App[None], tuner: Tuner | None) -> None:
    """SIGHUP (sshd closed the session, the window closed) or SIGTERM while the live view
    runs: unconfirmed trials are reverted before nettop ends, and with --revert-on-exit
    (`tuner` given) every change is. A hang-up leaves no terminal to restore; SIGTERM
    lets the app close its screen."""

    def after(signum: int) -> None:
        if signum == signal.SIGTERM:
            # the screen gets EXIT_GRACE_S to close; a shutdown that cannot finish (a
            # terminal that went away mid-write) must not outlive a SIGTERM
            threading.Timer(EXIT_GRACE_S, os._exit, (128 + signum,)).start()
            if threading.current_thread() is threading.main_thread():
                app.exit(return_code=128 + signum)
            else:  # the handler's own thread (nettop.actions.hangups)
                try:
                    app.call_from_thread(app.exit, return_code=128 + signum)
                except RuntimeError:
                    pass  # the app is no longer running: the timer ends the process
        else:
            os._exit(128 + signum)

    def revert_all() -> None:
        from nettop.actions.base import ActionError

        if tuner is not None:
            try:
                tuner.revert_all("exit")
            except ActionError:
                pass  # the journal keeps the originals for `nettop restore`

    install_exit_revert(revert_all if tuner is not None else None, after)


__all__ = ["SHOW_ENDED_S", "TRIAL_ACTIONS", "TRIAL_BINDINGS", "TrialMixin", "install_hangup"]
