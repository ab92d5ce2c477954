"""The app's small widgets: a one-line text that repaints only on change, a panel's
empty state, and the titled panel the keys zoom and jump between."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.containers import Vertical
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static


class TextLine(Widget):
    """One line of plain text that repaints only when its text changes (never a re-layout).

    The header changes every tick (its clock), and Textual's way from `render`'s Text to a
    line (a Content, wrapped, formatted) cost more than any table of the frame. A text
    that fits its line is drawn by Textual as that text in one segment of one style, and
    that style depends on the widget's styles, not the text: `render_line` learns it from
    one ordinary render per style and then makes the line itself. Anything else (a text
    too long, a tab or newline, a mouse selection, more lines) takes Textual's way.
    """

    def __init__(self, text: str = "", *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._text = text
        # (the widget's visual style, the style Textual gave a fitting text's one segment)
        self._learned: tuple[Any, Any] | None = None

    @property
    def text(self) -> str:
        return self._text

    def set(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.refresh()

    def render(self) -> Text:
        return Text(self._text, no_wrap=True, overflow="ellipsis", end="")

    def render_line(self, y: int) -> Strip:
        text = self._text
        if y != 0 or not text or not text.isprintable() or self.text_selection is not None:
            return super().render_line(y)
        cells = cell_len(text)
        if cells > self.content_size.width:
            return super().render_line(y)
        visual = self.visual_style
        learned = self._learned
        if learned is None or learned[0] != visual:
            strip = super().render_line(y)
            segments = list(strip)
            if len(segments) != 1 or segments[0].text != text:
                return strip  # not the one-segment line expected: Textual's way, every time
            self._learned = learned = (visual, segments[0].style)
            return strip
        return Strip([Segment(text, learned[1])], cells)


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
