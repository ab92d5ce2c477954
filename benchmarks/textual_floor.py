"""The least a Textual app can cost: one label updated once per second, nothing sampled.

tui_cost.py runs it next to nettop and htop, so the figures say how much of nettop's CPU
is Textual's own per-frame machinery (input and writer threads, compositor, driver) that
no nettop change can remove.
"""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.widgets import Static


class Floor(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("", id="clock")

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self.query_one("#clock", Static).update(time.strftime("%H:%M:%S"))


if __name__ == "__main__":
    Floor().run()
