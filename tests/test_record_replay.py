"""ReplaySource: stepping, seeking, events, speed, damage, and the app's header."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time

import pytest

from nettop.collectors.host import HostReader
from nettop.model.rates import compute_rates
from nettop.record import export, report
from nettop.record.replay import HISTORY, ReplaySource
from nettop.record.store import Reader, Writer
from nettop.model.timeline import Event

T0 = 1_800_000_000.0
N = 300


def _series(base):
    """N snapshots 1 s apart whose first link sends 1 MB/s more every sample."""
    name = sorted(base.links)[0]
    out = []
    for i in range(N):
        link = dataclasses.replace(base.links[name], tx_bytes=base.links[name].tx_bytes + i * i * 1_000_000)
        out.append(dataclasses.replace(base, t_mono=1000.0 + i, t_wall=T0 + i,
                                       links={**base.links, name: link}))
    return name, out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    with HostReader() as r:
        base = r.read()
    name, snaps = _series(base)
    path = str(tmp_path_factory.mktemp("replay") / "r.nettop")
    w = Writer(path, {"host": "lab-host", "interval_s": 1.0, "cpu_nodes": {"0": 0}})
    for i, s in enumerate(snaps):
        ev = [Event(s.t_wall, "tuning", f"#{i} set: txqueuelen {name} 1000 → 500")] if i in (100, 200) else []
        w.add_sample(s, ev)
    w.close()
    return path, name, snaps


def _source(path):
    src = ReplaySource(path, speed=60)
    src.paused = True
    src.start(lambda: None)
    return src


def test_first_point_then_steps_give_live_rates(recorded):
    path, name, snaps = recorded
    src = _source(path)
    assert src.timeline.latest().snapshot == snaps[0]
    p = src.step(5)
    assert p.snapshot == snaps[5]
    assert p.rates == compute_rates(snaps[4], snaps[5])
    assert p.rates.links[name].tx_bytes_per_s == pytest.approx(9_000_000)
    assert src.cpu_nodes == {0: 0} and src.host == "lab-host"
    src.stop()


def test_seek_rebuilds_the_history_the_charts_need(recorded):
    path, _, snaps = recorded
    src = _source(path)
    p = src.seek(T0 + 250.5)
    assert p.snapshot == snaps[250]
    pts = src.timeline.points()
    assert len(pts) == HISTORY and pts[0].snapshot == snaps[250 - HISTORY + 1]
    assert p.rates == compute_rates(snaps[249], snaps[250])
    assert [e.text for e in src.timeline.events()] == [e.text for e in src.events if e.t_wall <= T0 + 250][-2:]
    back = src.step(-10)
    assert back.snapshot == snaps[240]
    assert src.seek(T0 - 5).snapshot == snaps[0]
    assert src.seek(T0 + 10_000).snapshot == snaps[-1] and src.at_end
    src.stop()


def test_next_and_previous_event(recorded):
    path, _, snaps = recorded
    src = _source(path)
    e = src.next_event(1)
    assert e.t_wall == T0 + 100 and src.timeline.latest().snapshot == snaps[100]
    assert src.next_event(1).t_wall == T0 + 200
    assert src.next_event(1) is None and src.timeline.latest().snapshot == snaps[200]
    assert src.next_event(-1).t_wall == T0 + 100
    assert src.next_event(-1) is None
    src.stop()


def test_speed_and_interval_keys(recorded):
    path, _, _ = recorded
    src = ReplaySource(path, speed=500)
    assert src.speed == 60
    src.interval = 0.5  # the app's "-" key: faster
    assert src.speed == 2 and src.interval == 0.5
    src.interval = 60
    assert src.speed == 1
    src.reader.close()


def test_playback_runs_on_its_own_thread_and_wakes_the_app(recorded):
    path, _, snaps = recorded
    src = ReplaySource(path, speed=60)
    wakes = []
    src.start(lambda: wakes.append(1))
    src.seek_index(N - 40)
    deadline = time.monotonic() + 30
    taken = []
    while time.monotonic() < deadline and not (taken and taken[-1].snapshot == snaps[-1]):
        time.sleep(0.05)
        p = src.take()  # the app takes the newest point when woken
        if p is not None:
            taken.append(p)
    assert src.at_end and taken[-1].snapshot == snaps[-1]
    assert len(wakes) >= 2 and len(taken) >= 2
    times = [p.snapshot.t_wall for p in taken]
    assert times == sorted(times)
    src.paused = True
    src.stop()


def test_a_damaged_sample_becomes_a_problem_marker_and_replay_goes_on(recorded, tmp_path):
    path, _, snaps = recorded
    bad = str(tmp_path / "bad.nettop")
    import shutil
    shutil.copy(path, bad)
    db = sqlite3.connect(bad)
    db.execute("UPDATE sample SET ints = x'00' WHERE seq = 151")  # snaps[150]
    db.commit()
    db.close()
    src = _source(bad)
    while not src.at_end:
        src.step(1)
    shown = [p.snapshot for p in src.timeline.points()]
    assert snaps[149] in shown and snaps[150] not in shown
    problems = [e for e in src.timeline.events() if e.kind == "problem"]
    assert problems and "sample 151 fails its checksum" in problems[0].text
    # samples delta'd on the damaged one are lost up to the next key sample, not beyond
    assert snaps[-1] in shown
    src.stop()


def test_export_rows_and_report(recorded):
    path, name, _ = recorded
    r = Reader(path)
    rows = export.rows(r)
    assert len(rows) == N - 1
    assert rows[9][f"link.{name}.tx_bytes_per_s"] == pytest.approx(19_000_000)
    md = report.build(r)
    assert "| throughput (rx+tx, all interfaces) |" in md
    assert md.count("| tuning |") == 2
    assert "## Throughput" in md
    assert "\x1b" not in md  # Markdown for a ticket: no terminal escapes in the plot
    assert "▞▞ rx Mbit/s" in md and ".. tx Mbit/s" in md  # the lines differ without colour
    r.close()


def test_app_header_says_replay_with_the_recorded_host(recorded):
    pytest.importorskip("textual")
    import asyncio
    from nettop.tui.app import NettopApp

    path, _, snaps = recorded

    async def go():
        src = ReplaySource(path, speed=1)
        src.paused = True
        app = NettopApp(src)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            for _ in range(20):
                if app.latest is not None:
                    break
                await pilot.pause(0.05)
            return app.query_one("#header").text

    header = asyncio.run(go())
    assert "PAUSED" in header or "replay" in header
    assert snaps[0].host in header
