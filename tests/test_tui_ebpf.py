"""The eBPF key and panel: figures from scripted probe counts (checked against sums made
here from the raw counts), a replay of a recording that carries them, and the real probes
switched on by the key on the live host under a UDP flood through a lab veth."""

from __future__ import annotations

import os
import time

import pytest

from nettop.ebpf import EbpfProbes
from nettop.record.replay import ReplaySource
from nettop.record.store import Writer
from nettop.tui.app import NettopApp
from nettop.tui.ebpf_panel import DropTable, HardirqTable, NapiTable, SoftirqTable, header_text
from nettop.tui.scripted import ScriptedSource, synthetic
from nettop.tui.source import LiveSource

SIZE = (140, 44)


def text_of(app: NettopApp, selector: str) -> str:
    return str(app.query_one(selector).render())


async def scripted_app():
    src = ScriptedSource()
    app = NettopApp(src)
    return app, src


async def test_panel_shows_napi_mode_hardirq_softirq_and_drops_as_the_counts_say():
    app, src = await scripted_app()
    async with app.run_test(size=SIZE) as pilot:
        for i in range(3):
            src.push(synthetic(i, ebpf=True))
            await pilot.pause()
        await pilot.press("6")
        sample = app.latest.snapshot.ebpf
        assert app.query_one("#ebpf").display
        napi = app.query_one(NapiTable)
        by_id = {n.napi_id: n for n in sample.napi if n.ifname}
        for key in napi.row_keys():
            ifname, napi_id = key.split("/")[:2]
            if not ifname:
                continue
            n = by_id[int(napi_id)]
            assert napi.cell(key, "polls")[0] == _si(n.polls / sample.window_s)
            want = "polling" if n.full / n.polls >= 0.5 else "interrupt"
            assert napi.cell(key, "mode")[0] == want
        assert [napi.cell(k, "mode")[0] for k in napi.row_keys()].count("polling") == 1
        hard = app.query_one(HardirqTable)
        busiest = max(sample.hardirq, key=lambda r: r.time_ns)
        assert hard.row_keys()[0] == str(busiest.irq)
        assert hard.cell(str(busiest.irq), "count")[0] == _si(busiest.count / sample.window_s)
        soft = app.query_one(SoftirqTable)
        assert len(soft.row_keys()) == 2 * len(app.latest.snapshot.online_cpus)
        drops = app.query_one(DropTable)
        total = sum(d.count for d in sample.drops) / sample.window_s
        assert f"drops {_si(total)}/s" in app.query_one("#ebpf").border_title
        assert drops.cell(drops.row_keys()[0], "reason")[0] == max(sample.drops, key=lambda d: d.count).reason
        assert "eBPF on" in text_of(app, "#header")


def _si(v: float) -> str:
    from nettop.tui import format as fmt
    return fmt.si(v)


async def test_panel_stays_hidden_without_probe_figures_and_e_says_why_on_a_source_without_probes():
    app, src = await scripted_app()
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        src.push(synthetic(1))
        await pilot.pause()
        assert not app.query_one("#ebpf").display
        await pilot.press("e")
        await pilot.pause()
        assert any("no eBPF probes" in str(n.message) for n in app._notifications)
        assert "eBPF" not in text_of(app, "#header")


def test_header_text_names_each_state_and_the_probes_own_cost():
    s = synthetic(3, ebpf=True).ebpf
    assert header_text("compiling", None) == "eBPF compiling…"
    assert header_text("on", s) == f"eBPF on {s.cost_us_per_s:.0f} µs/s CPU"
    assert header_text(None, s) == "eBPF (recorded)"
    assert header_text("off", s) is None and header_text(None, None) is None


async def test_replay_shows_the_recorded_figures_and_e_cannot_toggle(tmp_path):
    path = str(tmp_path / "ebpf.db")
    w = Writer(path, {"host": "lab-host", "interval_s": 1.0, "cpu_nodes": {}})
    for i in range(5):
        w.add_sample(synthetic(i, cpus=2, ebpf=True), [])
    w.close()
    src = ReplaySource(path, speed=4)
    src.paused = True
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await app.workers.wait_for_complete()
            await pilot.pause(0.02)
            if app.latest is not None:
                break
        await pilot.press("e")
        await pilot.pause()
        assert any("cannot be turned on or off in a replay" in str(n.message) for n in app._notifications)
        assert app.query_one("#ebpf").display and "eBPF (recorded)" in text_of(app, "#header")
        napi = app.query_one(NapiTable)
        assert any(napi.cell(k, "mode")[0] == "polling" for k in napi.row_keys())


class _MissingTracepoint(EbpfProbes):
    """nettop's probes plus a tracepoint no kernel has: preflight refuses for real."""

    PROBES = {**EbpfProbes.PROBES, "nettop_missing": ("nettop:no_such_tracepoint",)}

    def __init__(self) -> None:
        super().__init__(("napi", "nettop_missing"))


_ok, _why = EbpfProbes.available()
needs_probes = pytest.mark.skipif(not _ok, reason=_why)


async def _until(pilot, cond, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await pilot.pause(0.1)


@needs_probes
async def test_e_with_a_tracepoint_this_kernel_lacks_gives_the_reason_and_sampling_goes_on():
    src = LiveSource(ifnames=["lo"], interval=0.2)
    src.probe_switch._factory = _MissingTracepoint
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.latest is not None, 20)
        await pilot.press("e")
        await _until(pilot, lambda: src.probe_switch.state == "off", 60)
        await pilot.pause(0.3)
        reason = src.probe_switch.reason
        assert reason and "no_such_tracepoint" in reason and "\n" not in reason
        assert reason in text_of(app, "#ebpf-empty")
        frames = app.frames
        await pilot.pause(0.6)
        assert app.frames > frames  # nettop runs on without them


@needs_probes
@pytest.mark.lab
async def test_e_turns_the_real_probes_on_and_a_udp_flood_shows_napi_and_softirq(veth_lab):
    veth_lab.ns_run(["ethtool", "-K", veth_lab.peer_if, "gro", "on", "rx-udp-gro-forwarding", "on"])
    netns = os.stat(f"/run/netns/{veth_lab.netns}").st_ino
    src = LiveSource(ifnames=[veth_lab.host_if], interval=0.5)
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.latest is not None, 20)
        frames = app.frames
        started = time.monotonic()
        await pilot.press("e")  # returns at once: the compile runs on the switch's thread
        assert src.probe_switch.state in ("compiling", "on")
        await _until(pilot, lambda: src.probe_switch.state == "on", 120)
        if time.monotonic() - started > 4 * src.interval:
            # A compile that spanned several ticks must not have frozen the screen;
            # a fast one may legitimately finish before the next tick is drawn.
            assert app.frames > frames, "no frame was drawn while the probes compiled"
        frames = app.frames
        await _until(pilot, lambda: app.frames > frames, 10)  # and drawing goes on with them on
        veth_lab.iperf3_server()
        cli = veth_lab.iperf3_client(3, extra=["-u", "-b", "0", "-l", "1200"])
        await _until(pilot, lambda: cli.poll() is not None, 30)
        await pilot.pause(1.2)  # a tick inside the flood's last second has been drawn

        def flooded() -> bool:
            doc = [p.snapshot.ebpf for p in src.timeline.points()[-8:] if p.snapshot.ebpf is not None]
            return any(n.netns == netns and n.polls > 0 for s in doc for n in s.napi)
        assert flooded()
        assert "eBPF on" in text_of(app, "#header") and "CPU" in text_of(app, "#header")
        soft = app.query_one(SoftirqTable)
        assert any(soft.cell(k, "vec")[0] == "NET_RX" for k in soft.row_keys())
        await pilot.press("e")
        await _until(pilot, lambda: src.probe_switch.state == "off", 60)
        await pilot.pause(1.2)
        assert "eBPF" not in text_of(app, "#header")
        assert app.latest.snapshot.ebpf is None
