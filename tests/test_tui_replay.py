"""Replay and record inside the app: every replay key on a real recording, the go-to
prompt, the header and notice, keys that belong to one mode only, and the record key
writing a file that the store's Reader opens (or failing in one line).

The recordings are written by the recorder's own Writer from the synthetic host of
`nettop.tui.scripted` (2026-01-01 00:00:00 UTC onwards, one sample a second), so the
times on screen are known exactly. Replays start paused: every move is a key press.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import threading
import time

import pytest

from test_tui_app import plain
from textual.widgets import Input

from nettop.record.replay import ReplaySource
from nettop.record.store import Reader, Writer
from nettop.kernel.sysroot import SysRoot
from nettop.model.timeline import Event
from nettop.tui import playback
from nettop.tui.app import NettopApp
from nettop.tui.screens import HelpScreen, Prompt
from nettop.tui.scripted import T_WALL0, ScriptedSource, synthetic
from nettop.tui.source import LiveSource
from treegen import generate_tree

N = 300
SIZE = (140, 40)
EVENT_AT = (100, 200)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tui-replay") / "incident.db")
    w = Writer(path, {"host": "lab-host", "interval_s": 1.0, "cpu_nodes": {"0": 0}})
    for i in range(N):
        ev = [Event(T_WALL0 + i, "tuning", f"#{i} set: rps_cpus eth0 rx-0 f → 1")] if i in EVENT_AT else []
        w.add_sample(synthetic(i, cpus=2), ev)
    w.close()
    return path


def text_of(app: NettopApp, selector: str) -> str:
    return str(app.query_one(selector).render())


async def settle(app: NettopApp, pilot) -> None:
    """Let the replay worker finish and the app draw what it published."""
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not app.seeking and not app.workers:
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def opened(path: str, speed: float = 4):
    src = ReplaySource(path, speed=speed)
    src.paused = True
    app = NettopApp(src)
    ctx = app.run_test(size=SIZE)
    pilot = await ctx.__aenter__()
    await settle(app, pilot)
    return app, src, pilot, ctx


@pytest.fixture
async def replay(recording):
    app, src, pilot, ctx = await opened(recording)
    yield app, src, pilot
    await ctx.__aexit__(None, None, None)


def shown_time(app: NettopApp) -> str:
    return app.latest.snapshot.t_wall - T_WALL0


# --- the pure parts -------------------------------------------------------------------


@pytest.mark.parametrize("text,offset", [
    ("+90", 90), ("-30", -30), ("-30s", -30), ("+5m", 300), ("-1h", -3600),
    ("00:04:10", 250), ("0:04", 240), ("00:00:00", 0), ("2026-01-01 00:02:00", 120),
])
def test_goto_times_are_utc_on_the_shown_date_or_relative(text, offset):
    now = T_WALL0 + 60
    assert playback.parse_goto(text, now) == pytest.approx(T_WALL0 + offset if ":" in text else now + offset)


@pytest.mark.parametrize("text", ["banana", "25:00", "12:61", "+", "14-03-20", ""])
def test_goto_rejects_what_is_not_a_time_in_one_line(text):
    with pytest.raises(ValueError) as err:
        playback.parse_goto(text, T_WALL0)
    assert "\n" not in str(err.value)


def test_speed_doubles_and_halves_within_1_to_60():
    assert [playback.next_speed(s, 1) for s in (1, 4, 32, 60)] == [2, 8, 60, 60]
    assert [playback.next_speed(s, -1) for s in (60, 4, 1.5, 1)] == [30, 2, 1, 1]


def test_default_record_file_names_host_and_utc_time():
    assert playback.default_record_path("lab/host", T_WALL0 + 3661, "/tmp") == \
        "/tmp/nettop-lab_host-20260101-010101.db"


# --- replay keys ----------------------------------------------------------------------


async def test_header_shows_recorded_date_time_speed_and_position(replay):
    app, src, pilot = replay
    header = text_of(app, "#header")
    for part in ("nettop replay PAUSED", "speed 4x", "lab-host", "2026-01-01 00:00:00 UTC", "sample 1/300"):
        assert part in header, part
    assert "every" not in header and "nettop CPU" not in header


async def test_notice_says_replay_of_the_file_and_tuning_disabled(replay):
    app, src, pilot = replay
    assert app.query_one("#notice").display
    assert text_of(app, "#notice") == "replay of incident.db — tuning disabled"


async def test_full_stop_and_comma_step_one_sample_and_pause(replay):
    app, src, pilot = replay
    src.paused = False
    for _ in range(3):
        await pilot.press("full_stop")
        await settle(app, pilot)
    assert src.paused and src.position == 3 and shown_time(app) == 3
    assert "2026-01-01 00:00:03 UTC" in text_of(app, "#header") and "sample 4/300" in text_of(app, "#header")
    await pilot.press("comma")
    await settle(app, pilot)
    assert src.position == 2 and shown_time(app) == 2
    # a step back rebuilt the history: the point shown has the rates of its interval
    assert app.latest.rates is not None and len(src.timeline.points()) == 3


async def test_brackets_jump_between_recorded_events(replay):
    app, src, pilot = replay
    await pilot.press("right_square_bracket")
    await settle(app, pilot)
    assert shown_time(app) == 100
    await pilot.press("right_square_bracket")
    await settle(app, pilot)
    assert shown_time(app) == 200
    assert [e.text for e in src.timeline.events() if e.kind == "tuning"][-1].startswith("#200 ")
    await pilot.press("right_square_bracket")  # none later: stays
    await settle(app, pilot)
    assert shown_time(app) == 200
    await pilot.press("left_square_bracket")
    await settle(app, pilot)
    assert shown_time(app) == 100


async def test_angle_brackets_double_and_halve_the_speed_within_bounds(replay):
    app, src, pilot = replay
    await pilot.press("greater_than_sign")
    assert src.speed == 8 and "speed 8x" in text_of(app, "#header")
    assert src.interval == pytest.approx(1 / 8)
    for _ in range(5):
        await pilot.press("greater_than_sign")
    assert src.speed == 60
    for _ in range(8):
        await pilot.press("less_than_sign")
    assert src.speed == 1 and "speed 1x" in text_of(app, "#header")


async def test_g_opens_a_prompt_and_seeks_to_the_typed_time(replay):
    app, src, pilot = replay
    await pilot.press("g")
    assert isinstance(app.screen, Prompt)
    await pilot.press(*"00:04:10", "enter")
    await settle(app, pilot)
    assert not isinstance(app.screen, Prompt)
    assert shown_time(app) == 250 and "2026-01-01 00:04:10 UTC" in text_of(app, "#header")
    assert len(src.timeline.points()) == 180  # the charts' history came back with the seek
    await pilot.press("g", *"-30", "enter")
    await settle(app, pilot)
    assert shown_time(app) == 220


async def test_g_keeps_the_prompt_open_with_one_line_when_the_time_is_wrong(replay):
    app, src, pilot = replay
    await pilot.press("g", *"banana", "enter")
    assert isinstance(app.screen, Prompt)
    error = str(app.screen.query_one("#prompt-error").render())
    assert "'banana' is not a time" in error
    await pilot.press("escape")
    assert not isinstance(app.screen, Prompt) and shown_time(app) == 0


async def test_a_seek_runs_off_the_ui_thread_and_the_header_says_seeking(replay):
    app, src, pilot = replay
    release = threading.Event()
    threads: list[str] = []
    real_seek = src.seek

    def slow_seek(t):  # the real seek, held until the test has looked at the screen
        threads.append(threading.current_thread().name)
        release.wait(10)
        return real_seek(t)

    src.seek = slow_seek
    await pilot.press("g", *"+120", "enter")
    await pilot.pause(0.05)
    assert "seeking…" in text_of(app, "#header")
    theme = app.theme
    await pilot.press("t")  # the UI answers keys while the seek is under way
    assert app.theme != theme
    release.set()
    await settle(app, pilot)
    assert threads and threads[0] != threading.main_thread().name
    assert "seeking…" not in text_of(app, "#header") and shown_time(app) == 120


async def test_replay_offers_replay_keys_and_no_record_or_tuning_key(replay):
    app, src, pilot = replay
    actions = {b.action for b in app.active_bindings_list()}
    assert {"step(1)", "step(-1)", "next_event(1)", "next_event(-1)", "speed(1)", "speed(-1)", "goto"} <= actions
    assert "record" not in actions
    await pilot.press("R")
    assert not isinstance(app.screen, Prompt) and not src_has_recording(src)
    await pilot.press("question_mark")
    assert isinstance(app.screen, HelpScreen)
    help_text = plain(app.screen.query_one("#help-keys"))
    for b in playback.REPLAY_BINDINGS:
        assert b.tooltip in help_text
    record_key = playback.RECORD_BINDINGS[0].tooltip
    assert record_key not in help_text and "start / stop recording" not in help_text
    await pilot.press("escape")
    footer = " ".join(str(k.render()) for k in app.screen.query("FooterKey"))
    assert "go to" in footer and "record" not in footer


def src_has_recording(src) -> bool:
    return getattr(src, "tap", None) is not None and src.tap.active


async def test_live_offers_no_replay_key():
    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        await pilot.pause()
        actions = {b.action.split("(")[0] for b in app.active_bindings_list()}
        assert not actions & playback.REPLAY_ACTIONS and "record" in actions
        await pilot.press("g", "full_stop", "right_square_bracket", "greater_than_sign")
        assert not isinstance(app.screen, Prompt) and app.seeking == 0
        footer = " ".join(str(k.render()) for k in app.screen.query("FooterKey"))
        assert "go to" not in footer


async def test_damage_warnings_are_one_line_in_the_notice(recording, tmp_path):
    bad = str(tmp_path / "damaged.db")
    shutil.copy(recording, bad)
    db = sqlite3.connect(bad)
    db.execute("UPDATE sample SET ints = x'00' WHERE seq = 3")
    db.commit()
    db.close()
    app, src, pilot, ctx = await opened(bad)
    try:
        for _ in range(4):
            await pilot.press("full_stop")
            await settle(app, pilot)
        notice = text_of(app, "#notice")
        assert notice.startswith("replay of damaged.db — tuning disabled │ ")
        assert "sample 3 fails its checksum" in notice and "\n" not in notice
    finally:
        await ctx.__aexit__(None, None, None)


# --- record key -----------------------------------------------------------------------


def wait_until(cond, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


async def test_R_records_the_live_source_on_its_own_thread_into_a_replayable_file(tmp_path, monkeypatch):
    tree = generate_tree(tmp_path / "tree", cpus=4, irqs=32, queues=2)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path / "state"))
    src = LiveSource(SysRoot(str(tree)), None, interval=0.1)
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):
            if app.latest is not None:
                break
            await pilot.pause(0.05)
        await pilot.press("R")
        assert isinstance(app.screen, Prompt)
        default = app.screen.query_one(Input).value
        assert default.startswith(f"nettop-{app.latest.snapshot.host}-") and default.endswith(".db")
        await pilot.press("enter")
        assert src.tap.active
        frames = app.frames
        # the UI loop is blocked here: the sampler thread records on regardless
        wait_until(lambda: src.tap.status().samples >= 8)
        assert app.frames == frames
        await pilot.pause(0.1)
        assert f"● REC {default} " in text_of(app, "#header")
        await pilot.press("R")
        assert not src.tap.active and "REC" not in text_of(app, "#header")
        shown = {p.snapshot.t_mono: p.snapshot for p in src.timeline.points()}
    status = app.recorded[0]
    assert status.path == default and status.samples >= 8
    r = Reader(str(tmp_path / default))
    try:
        assert len(r) == status.samples and r.meta["host"] == shown[r.index[0].t_mono].host
        snaps = list(r.snapshots())
        assert len(snaps) == status.samples
        assert all(s == shown[s.t_mono] for s in snaps)  # exactly what the screen had
        assert [s.t_mono for s in snaps] == sorted(s.t_mono for s in snaps)
        assert ReplaySource(str(tmp_path / default)).host == snaps[0].host
    finally:
        r.close()


async def test_record_file_gets_the_events_that_arrive_while_recording(tmp_path, monkeypatch):
    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path / "state"))
    src = ScriptedSource()
    app = NettopApp(src)
    path = str(tmp_path / "marks.db")
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        await pilot.pause()
        src.add_event(Event(T_WALL0, "mark", "before the recording"))
        await pilot.press("R")
        app.screen.query_one(Input).value = path
        await pilot.press("enter")
        for i in range(1, 6):
            if i == 3:
                await pilot.press("m")  # a mark on the newest sample
            src.push(synthetic(i))
            await pilot.pause()
        await pilot.press("R")
    r = Reader(path)
    try:
        assert len(r) == 5
        assert [e.text for e in r.events()] == ["marked by the operator"]
    finally:
        r.close()


async def test_R_into_a_missing_directory_is_one_line_and_the_app_runs_on(tmp_path):
    src = ScriptedSource()
    app = NettopApp(src)
    missing = str(tmp_path / "no-such-dir" / "x.db")
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        await pilot.pause()
        await pilot.press("R")
        app.screen.query_one(Input).value = missing
        await pilot.press("enter")
        assert not src.tap.active
        notice = text_of(app, "#notice")
        assert notice.startswith(f"not recording: cannot create {missing}: No such file or directory")
        assert app.query_one("#notice").display and "REC" not in text_of(app, "#header")
        frames = app.frames
        src.push(synthetic(1))
        await pilot.pause()
        assert app.frames == frames + 1 and app.is_running
    assert not os.path.exists(missing)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
async def test_a_full_disk_stops_the_recording_with_one_line_and_the_app_runs_on(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "nettop-test", str(mnt)], check=True)
    try:
        src = ScriptedSource()
        app = NettopApp(src)
        async with app.run_test(size=SIZE) as pilot:
            src.push(synthetic(0, cpus=64))
            await pilot.pause()
            await pilot.press("R")
            app.screen.query_one(Input).value = str(mnt / "full.db")
            await pilot.press("enter")
            assert src.tap.active
            for i in range(1, 400):
                src.push(synthetic(i, cpus=64))
                await pilot.pause()
                if not src.tap.active:
                    break
            assert not src.tap.active
            notice = text_of(app, "#notice")
            assert notice.startswith("recording stopped: ") and "\n" not in notice
            assert "full" in notice.lower()
            frames = app.frames
            src.push(synthetic(500, cpus=64))
            await pilot.pause()
            assert app.frames == frames + 1 and "REC" not in text_of(app, "#header")
        assert app.recorded and app.recorded[0].samples >= 1
        r = Reader(str(mnt / "full.db"))
        assert len(r) == app.recorded[0].samples
        r.close()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
