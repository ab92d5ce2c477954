"""The replay keys: step, jump between events, speed, go to a time.

A move that rebuilds the chart history (a seek replays ~180 samples) runs on a worker
thread so the screen never freezes; the new point arrives through the source's mailbox
as usual and `Moved` says the move is done.
"""

from __future__ import annotations

from typing import Any, Callable

from textual import work

from nettop.model.timeline import Event
from nettop.pipeline.source import Playback
from nettop.tui import playback
from nettop.tui.drawing import DrawingMixin
from nettop.tui.messages import Moved
from nettop.tui.screens import Prompt


class ReplayKeysMixin(DrawingMixin):
    """Keys offered only when the source is a recording (see `check_action`).

    `_on_moved` is found by Textual's naming convention, not `@on`: the decorator only
    registers handlers on classes built by Textual's metaclass, and a mixin is not one.
    """

    def action_step(self, n: int) -> None:
        self.source.paused = True  # stepping is frame by frame: playback stops, as in players
        self._replay_move(lambda s: s.step(n), "step" if n > 0 else "back")

    def action_next_event(self, direction: int) -> None:
        self._replay_move(lambda s: s.next_event(direction), "event" if direction > 0 else "prev event")

    def action_speed(self, direction: int) -> None:
        src, pb = self.source, self.source.playback()
        if pb is None:
            return
        new = playback.next_speed(pb.speed, direction)
        src.interval = src.interval * pb.speed / new  # the setter wakes the playback thread
        pb.speed = new
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

    def _replay_move(self, move: Callable[[Playback], Any], what: str) -> None:
        self.seeking += 1
        self._draw_header()
        self._move_worker(move, what)

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _move_worker(self, move: Callable[[Playback], Any], what: str) -> None:
        """Runs a move on a thread (a seek replays ~180 samples); the new point arrives as
        usual through the source's mailbox, then `Moved` says it is done."""
        pb = self.source.playback()
        if pb is None:
            self.post_message(Moved(what, None, f"{what}: this source is not a recording"))
            return
        try:
            result = move(pb)
        except Exception as exc:  # noqa: BLE001 - one line on screen, the app goes on
            self.post_message(Moved(what, None, f"{what}: {exc}"))
            return
        self.post_message(Moved(what, result))

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
