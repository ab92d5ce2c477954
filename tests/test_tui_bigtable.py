"""Long tables format only the rows on screen: 512 queues cost what twenty rows cost."""

from __future__ import annotations

from textual.app import App, ComposeResult

from nettop.tui.tables import LiveTable


class Numbers(LiveTable):
    COLUMNS = (("k", "key", 8), ("v", "value", 8))
    LEFT = frozenset({"k"})


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Numbers(id="t")


async def test_rows_off_screen_are_formatted_only_when_scrolled_into_view():
    made: list[str] = []

    def rows(tick: int):
        def make(k: int):
            def cells():
                made.append(f"r{k}")
                return ((f"r{k}", ""), (str(k * tick), ""))
            return cells
        return [(f"r{k}", make(k)) for k in range(512)]

    app = Host()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Numbers)
        table.sync_visible(rows(1))  # the first tick makes every row once: they are new
        await pilot.pause()
        assert len(made) == 512
        made.clear()
        table.sync_visible(rows(2))
        await pilot.pause()
        assert 0 < len(made) <= 13, made  # the rows on screen (12 lines, one header) and a spare
        assert table.cell("r5", "v") == ("10", "")
        made.clear()
        table.focus()
        await pilot.press("end")  # to the last row: it is made from tick 2 as it comes into view
        await pilot.pause()
        assert "r511" in made and len(made) <= 24
        assert table.cell("r511", "v") == ("1022", "")
        assert "1022" in "".join(s.text for s in (table.render_line(y) for y in range(12)))
