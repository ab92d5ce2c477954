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
            made.append(f"r{k}")
            return ((f"r{k}", ""), (str(k * tick), ""))
        return [f"r{k}" for k in range(512)], make

    app = Host()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Numbers)
        table.sync_visible(*rows(1))  # the first tick makes every row once: they are new
        await pilot.pause()
        assert len(made) == 512
        made.clear()
        table.sync_visible(*rows(2))
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


async def test_a_tick_joins_only_the_queue_rows_on_screen(monkeypatch):
    """GIVEN 2 x 128 queues on eth0 and veth0 (512 rows) WHEN a tick after the first is drawn
    THEN only the rows on screen are joined, and they read as the full join's rows."""
    from nettop.output.device_doc import QueueJoiner
    from nettop.tui import model
    from nettop.tui.app import NettopApp
    from nettop.tui.drawing import TREND_WIDTH
    from nettop.tui.scripted import ScriptedSource, synthetic
    from nettop.tui import format as fmt
    from nettop.tui.tables import QueueTable

    joined: list[object] = []
    join = QueueJoiner.join

    def counted(self, q):
        joined.append(q)
        return join(self, q)

    monkeypatch.setattr(QueueJoiner, "join", counted)
    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        for i in range(3):
            src.push(synthetic(i, queues=128))
            await pilot.pause()
        table = app.query_one(QueueTable)
        assert len(table.row_keys()) == 512
        joined.clear()
        point = src.push(synthetic(3, queues=128))
        await pilot.pause()
        assert 0 < len(joined) <= table.size.height + 1, len(joined)
        rows = {r.key: r for r in model.queue_rows(point, ["eth0", "veth0"])}
        hist = model.queue_activity_history(src.timeline.points()[-TREND_WIDTH:], list(rows.values()), TREND_WIDTH)
        for key in table.row_keys()[:table.size.height - 1]:
            want = QueueTable.cells(rows[key], fmt.sparkline(hist[key], TREND_WIDTH))
            assert tuple(table.cell(key, c) for c, _, _ in QueueTable.COLUMNS) == want
