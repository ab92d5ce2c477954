"""TextLine draws a fitting text itself (`TextLine.render_line`): each line must be the
one Textual draws from `render`, segment for segment and style for style (meta too)."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.strip import Strip

from nettop.tui.widgets import TextLine

TEXTS = [
    "nettop live │ findings 0 │ every 1s │ nettop CPU 1.0% │ vm │ 6.18.44-fc-v595 │ 03:17:08 UTC │ sampler 0.3%",
    "nettop live │ ● REC /tmp/x.ntrec 1.2MB │ ◆ ssh via eth0 │ every 1s",
    "  two  spaces  and a trailing one ",
    "wide 日本語 text │ é",
    "x",
    "a\ttab",
    "two\nlines",
    "",
]


class _Plain(TextLine):
    """The same widget drawn only Textual's way."""

    def render_line(self, y: int) -> Strip:
        return super(TextLine, self).render_line(y)


class _Pair(App[None]):
    CSS = """
    TextLine { height: 1; background: $panel; color: $foreground; text-style: bold; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield TextLine(id="fast")
        yield _Plain(id="plain")


def _segments(widget: TextLine) -> list[tuple[str, object]]:
    strips = widget.render_lines(widget.region.reset_offset)
    return [(seg.text, seg.style) for strip in strips for seg in strip]


def test_a_text_line_is_drawn_as_textual_draws_it() -> None:
    async def run() -> int:
        app = _Pair()
        compared = 0
        async with app.run_test(size=(100, 6)) as pilot:
            fast, plain = app.query_one("#fast", TextLine), app.query_one("#plain", TextLine)
            for width in (100, 80, 40, 12):
                await pilot.resize_terminal(width, 6)
                await pilot.pause()
                for theme in ("textual-dark", "textual-light"):
                    app.theme = theme
                    await pilot.pause()
                    for n in range(3):  # the learned style, then the fast path, on fresh texts
                        for text in TEXTS:
                            text = f"{text} {n}" if text else text
                            fast.set(text)
                            plain.set(text)
                            assert _segments(fast) == _segments(plain), (width, theme, text)
                            compared += 1
            assert fast._learned is not None  # the fast path was taken
        return compared

    assert asyncio.run(run()) == 4 * 2 * 3 * len(TEXTS)
