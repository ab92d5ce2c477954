"""The app's small widgets: a one-line text that repaints only on change, a panel's
empty state, and the titled panel the keys zoom and jump between."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer, Static


class KeptLines:
    """Mixin for a widget whose drawn lines change only through `refresh`: `render_lines`
    hands back the last frame's lines while nothing was refreshed and the size and style
    are the same.

    Why: Textual's compositor renders every widget that overlaps the rectangle around
    all of a frame's changes, and the header (its clock) changes every tick, so every
    panel, table and chart from the top down to the lowest changed cell is rendered every
    frame. Each such render walks the widget's ancestors for its colours and its lines
    through the styles cache even when every line is cached (~0.1-0.3 ms a widget): the
    kept lines skip that. A refresh, a new size (a resize also marks the widget dirty),
    another style (focus, hover, theme: a new `visual_style` object) or a scroll drop them.
    """

    _kept: tuple[tuple[object, ...], list[Strip]] | None = None

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Any:
        self._kept = None
        return super().refresh(*regions, repaint=repaint, layout=layout,  # type: ignore[misc]
                               recompose=recompose)

    def _kept_key(self, crop: Region) -> tuple[object, ...]:
        """What the lines depend on besides refreshes: the crop, the size, the style (Textual
        makes a new object on any style change; the key holds it, so an equal one compares
        by value) and the scroll."""
        widget: Any = self
        return (crop, widget.size, widget.visual_style, widget.scroll_offset,
                widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar)

    def render_lines(self, crop: Region) -> list[Strip]:
        key = self._kept_key(crop)
        kept = self._kept
        if kept is not None and kept[0] == key:
            return list(kept[1])
        lines: list[Strip] = super().render_lines(crop)  # type: ignore[misc]
        self._kept = (key, list(lines))
        return lines


class PanelsScroll(KeptLines, VerticalScroll):
    """The scrolling box of the panels: under the header, so rendered every frame (its
    own background only; the panels are widgets of their own) unless its lines are kept."""


class KeysFooter(KeptLines, Footer):
    """The key bar: its own lines (the bar's background; each key is a widget of its own)
    are kept, as it is rendered every frame otherwise (the frame's changes span the screen)."""


class LiveScreen(KeptLines, Screen[None]):
    """The app's first screen (`NettopApp.get_default_screen`), whose own lines (its
    background) are kept: it spans every frame's changed rectangle. It is the bottom of
    the stack, so it never draws another screen behind it (Screen.render does that only
    for a translucent screen above another)."""


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


class Panel(KeptLines, Vertical):
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
