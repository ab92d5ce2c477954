"""The app's small widgets: a one-line text that repaints only on change, a panel's
empty state, and the titled panel the keys zoom and jump between."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static


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
