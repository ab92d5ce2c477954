"""The app on a `record --dir` directory: the files play as one recording, the keys move
across file boundaries, and `--at` starts at the right sample of the right file."""

from __future__ import annotations

import io

import pytest

from test_tui_replay import SIZE, settle, text_of
from nettop.model.timeline import Event
from nettop.record.replay import ReplaySource
from nettop.record.rotate import DirWriter, Rotation
from nettop.tui.app import NettopApp
from nettop.tui.scripted import T_WALL0, synthetic

N = 300  # five one-minute files


class Clock:
    def __init__(self) -> None:
        self.i = 0

    def wall(self) -> float:
        return T_WALL0 + self.i

    def mono(self) -> float:
        return 1000.0 + self.i


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tui-dir") / "nettop")
    clock = Clock()
    w = DirWriter(Rotation(d, period=60.0), {"host": "lab-host", "interval_s": 1.0, "cpu_nodes": {"0": 0}},
                  clock=clock, out=io.StringIO(), err=io.StringIO())
    for i in range(N):
        clock.i = i
        snap = synthetic(i, cpus=2)
        ev = [Event(snap.t_wall, "tuning", f"#{i} set: rps_cpus eth0 rx-0 f → 1")] if i in (100, 200) else []
        w.add_sample(snap, ev)
    w.close()
    return d


@pytest.fixture
async def at_3_min(directory):
    src = ReplaySource(directory, speed=4)
    src.paused = True
    src.seek(T_WALL0 + 179.5)  # what `nettop replay DIR --at "2026-01-01 00:02:59"` does before the app
    app = NettopApp(src)
    ctx = app.run_test(size=SIZE)
    pilot = await ctx.__aenter__()
    await settle(app, pilot)
    yield app, src, pilot
    await ctx.__aexit__(None, None, None)


async def test_at_shows_the_sample_and_the_keys_cross_into_the_next_file(at_3_min):
    app, src, pilot = at_3_min
    header = text_of(app, "#header")
    assert "2026-01-01 00:02:59 UTC" in header and "sample 180/300" in header, header
    assert text_of(app, "#notice") == "replay of nettop — tuning disabled"
    assert src.reader.file_of(179) != src.reader.file_of(180)
    await pilot.press("full_stop")
    await settle(app, pilot)
    assert "2026-01-01 00:03:00 UTC" in text_of(app, "#header")
    assert app.latest.rates is not None  # rates across the boundary, as in one file
    await pilot.press("comma", "comma")
    await settle(app, pilot)
    assert "2026-01-01 00:02:58 UTC" in text_of(app, "#header")
    await pilot.press("left_square_bracket")  # the event in the second file
    await settle(app, pilot)
    assert "2026-01-01 00:01:40 UTC" in text_of(app, "#header")
    await pilot.press("g", *"00:04:30", "enter")
    await settle(app, pilot)
    assert "2026-01-01 00:04:30 UTC" in text_of(app, "#header") and "sample 271/300" in text_of(app, "#header")
