"""KeptLines hands back a widget's last lines while nothing refreshed it: through ticks,
keys (cursor, scroll, sort, zoom, focus), a theme change and resizes, every kept widget's
lines must equal the lines Textual renders for it then."""

from __future__ import annotations

from textual.widget import Widget

from nettop.tui.app import NettopApp
from nettop.tui.scripted import ScriptedSource, synthetic
from nettop.tui.widgets import KeptLines


def _check(app: NettopApp) -> int:
    checked = 0
    for widget in [app.screen, *app.screen.query("*")]:
        if not isinstance(widget, KeptLines) or not widget.display or not widget.region:
            continue
        crop = widget.region.reset_offset
        kept = widget.render_lines(crop)  # type: ignore[attr-defined]
        drawn = Widget.render_lines(widget, crop)  # type: ignore[arg-type]
        assert [list(s) for s in kept] == [list(s) for s in drawn], widget
        checked += 1
    return checked


async def test_kept_lines_are_the_lines_textual_draws() -> None:
    app = NettopApp(ScriptedSource())
    async with app.run_test(size=(120, 40)) as pilot:
        checked = 0
        steps = ["down", "down", "pagedown", "end", "home", "tab", "down", "s", "s", "t", "2", "z", "z",
                 "shift+tab", "up"]
        for i in range(24):
            app.source.push(synthetic(i, queues=12, cpus=8, veths=3))
            await pilot.pause()
            checked += _check(app)
            if i >= 8 and steps:
                await pilot.press(steps.pop(0))
                await pilot.pause()
                checked += _check(app)
        for size in ((100, 36), (120, 40)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            app.source.push(synthetic(30, queues=12, cpus=8, veths=3))
            await pilot.pause()
            checked += _check(app)
        assert checked > 100
