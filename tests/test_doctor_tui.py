"""The findings panel on the real kernel: a busy lab veth with GRO off is a finding; 7
goes to it, Enter opens the tuning prompt with its fix, applying it journals the change
and, after the next samples, the panel shows it resolved with its figures. Also: the
count in the header, dismissing, and replay showing the findings as they were.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from nettop.actions import Journal, Tuner
from nettop.collectors.host import HostReader
from nettop.doctor import DoctorConfig
from nettop.doctor.watch import Watch
from nettop.kernel.sysroot import LIVE
from nettop.tui.app import NettopApp
from nettop.tui.doctor_panel import FindingsTable
from nettop.tui.scripted import ScriptedSource

from doctor_host import FakeHost

SIZE = (160, 50)


class WatchedSource(ScriptedSource):
    """The scripted source plus the live source's Watch, fed on push as the sampler does."""

    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.doctor = watch

    def push(self, snap):  # type: ignore[no-untyped-def]
        point = self.timeline.append(snap)
        self.doctor.observe(point, self.timeline)
        if self._mailbox.put(point) and self._wake is not None:
            self._wake()
        return point


def cells(app: NettopApp) -> list[tuple[str, ...]]:
    t = app.query_one("#findings-table", FindingsTable)
    return [tuple(t.cell(k, c)[0] for c in ("sev", "id", "what", "fix")) for k in t.row_keys()]


async def test_enter_applies_the_fix_and_the_panel_shows_it_resolved(veth_lab, tmp_path):
    ifname = veth_lab.host_if
    watch = Watch(DoctorConfig(window_s=1.0), settle_s=1.5)
    src = WatchedSource(watch)
    tuner = Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)
    app = NettopApp(src, tuner=tuner)
    veth_lab.iperf3_server()
    veth_lab.iperf3_client(30, reverse=True)  # the peer sends: the host end receives with GRO off
    reader = HostReader(LIVE, ifnames=[ifname])
    fid = f"offloads-off:{ifname}"
    try:
        async with app.run_test(size=SIZE) as pilot:
            async def tick(n: int) -> None:
                for _ in range(n):
                    snap = await asyncio.to_thread(reader.read)
                    src.push(snap)
                    await pilot.pause()
                    await asyncio.sleep(0.5)
            await asyncio.sleep(0.5)
            for _ in range(12):  # the stream ramps up; the machine may be busy
                await tick(1)
                if any(r[1] == fid for r in cells(app)):
                    break
            assert any(r[1] == fid and r[3] == f"features {ifname} gro=on" for r in cells(app)), cells(app)
            assert "findings " in app.query_one("#header").text  # type: ignore[attr-defined]
            await pilot.press("7")
            table = app.query_one("#findings-table", FindingsTable)
            assert app.focused is table
            table.cursor = [k.split("|", 1)[1] for k in table.row_keys()].index(fid)
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen.query_one("#prompt-input").value == f"features {ifname} gro=on"
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert [e for e in tuner.journal.read_state().entries if "gro" in str(e)], "the fix was journaled"
            await tick(6)
            v = watch.verdicts[fid]
            assert v.resolved is True and v.before["gro_off"] == 1.0
            row = next(r for r in cells(app) if r[0] == "ok")
            assert row[1] == fid and "resolved after `features" in row[2]
            assert all(r[1] != fid for r in cells(app) if r[0] != "ok")
    finally:
        reader.close()
        await asyncio.to_thread(tuner.revert_all)


async def test_dismiss_hides_a_finding_for_the_session_and_the_header_counts():
    bad = FakeHost(conntrack=(97, 100), dropped={1: 10})
    watch = Watch()
    src = WatchedSource(watch)
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        for k in range(3):
            src.push(bad.snapshot(float(k)))
            await pilot.pause()
        assert {r[1] for r in cells(app)} == {"conntrack:host", "softnet-drops:host"}
        assert "findings 2 (2 crit)" in app.query_one("#header").text  # type: ignore[attr-defined]
        await pilot.press("7")
        table = app.query_one("#findings-table", FindingsTable)
        table.cursor = [k.split("|", 1)[1] for k in table.row_keys()].index("conntrack:host")
        await pilot.press("enter")  # no nettop fix: the command is shown instead
        await pilot.pause()
        assert any("nf_conntrack_max" in n.message for n in app._notifications)
        await pilot.press("x")
        src.push(bad.snapshot(3.0))
        await pilot.pause()
        assert {r[1] for r in cells(app)} == {"softnet-drops:host"}
        assert "findings 1 (1 crit)" in app.query_one("#header").text  # type: ignore[attr-defined]


async def test_replay_shows_the_findings_as_they_were_without_a_watch():
    src = ScriptedSource(mode="replay")
    app = NettopApp(src)
    app.replaying = False  # the scripted source has no replay controls; findings come from the timeline
    async with app.run_test(size=SIZE) as pilot:
        for k in range(2):
            src.push(FakeHost(conntrack=(90, 100)).snapshot(float(k)))
            await pilot.pause()
        assert [r[1] for r in cells(app)] == ["conntrack:host"]


async def test_a_replayed_recording_judges_its_findings_on_the_playback_thread(tmp_path, monkeypatch):
    """ReplaySource judges each point where it makes it (issue 29: nothing per point on the
    UI thread); the panel only shows what it was given."""
    import threading

    import nettop.doctor.engine
    from nettop.record.replay import ReplaySource
    from nettop.record.store import Writer

    path = str(tmp_path / "conntrack.nettop")
    w = Writer(path, {"host": "host", "interval_s": 1.0})
    for k in range(40):
        w.add_sample(FakeHost(conntrack=(90, 100)).snapshot(float(k)))
    w.close()
    threads: list[str] = []
    real = nettop.doctor.engine.evaluate

    def judged(*a, **kw):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return real(*a, **kw)

    monkeypatch.setattr(nettop.doctor.engine, "evaluate", judged)  # any judging, the panel's included
    src = ReplaySource(path, speed=60)
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if src.position >= 5 and any(r[1] == "conntrack:host" for r in cells(app)):
                break
        assert [r[1] for r in cells(app)] == ["conntrack:host"]
        assert src.findings() and src.findings()[0].id == "conntrack:host"
    played = threads[1:]  # the first point is published by start(), on the caller's thread
    assert played and set(played) == {"nettop-replay"}, threads
