"""The summary (the default screen below 120x34): pure rows and lines without Textual,
then the app at 80x24 with Pilot, and the default route read from a real kernel."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from nettop.kernel.routes import default_ifindexes, read_default_ifindexes
from nettop.model.timeline import Timeline
from nettop.tui import model
from nettop.tui.app import NettopApp
from nettop.tui.scripted import ScriptedSource, synthetic
from nettop.tui.screens import HelpScreen
from nettop.tui.summary import SummaryData, SummaryView, cpu_lines, line_text, summary_lines

LAB = dict(veths=3, idle=("ifb0", "ifb1", "dummy-down"), ping=("198.18.0.2", "tcp://198.18.0.6:22"))


def points(n: int = 12, **kw) -> list:
    tl = Timeline()
    for i in range(n):
        tl.append(synthetic(i, **kw))
    return tl.points()


def data_of(pts, first=("eth0",), picked=False) -> SummaryData:
    point = pts[-1]
    names = model.shown_interfaces(point.snapshot, None)
    order = model.summary_order(point.rates, names, list(first))
    idle = [] if picked else model.idle_interfaces(pts, order, keep=first)
    busy = [n for n in order if n not in idle]
    return SummaryData(model.iface_summaries(pts, busy, first), [(n, point.snapshot.links[n].operstate) for n in idle],
                       model.cpu_rows(point), model.latency_rows(point.snapshot), {},
                       model.qdisc_summaries(point, busy), probing=False)


# --- rows -------------------------------------------------------------------------------


def test_the_default_route_interface_comes_first_else_eth0():
    snap = synthetic(1, veths=3)
    assert model.first_interfaces(snap, (snap.links["veth2"].ifindex,)) == ["veth2"]
    assert model.first_interfaces(snap, ()) == ["eth0"]
    assert model.first_interfaces(snap, (999,)) == ["eth0"]  # a route via an interface not shown
    pts = points(3, veths=3)
    order = model.summary_order(pts[-1].rates, ["eth0", "veth0", "veth1", "veth2"], ["veth2"])
    assert order[0] == "veth2" and order[1] == "veth0"  # then the busiest


def test_idle_links_without_queue_irqs_fold_but_eth0_and_busy_ones_do_not():
    pts = points(12, **LAB)
    names = model.shown_interfaces(pts[-1].snapshot, None)
    assert model.idle_interfaces(pts, names) == ["dummy-down", "ifb0", "ifb1"]
    assert "ifb0" not in model.idle_interfaces(pts, names, keep=["ifb0"])


def test_hottest_queue_and_the_cpu_that_serves_it():
    pts = points(6, **LAB)
    rows = {r.name: r for r in model.iface_summaries(pts, ["eth0", "veth0"], ["eth0"])}
    eth0 = rows["eth0"]
    busiest = max((q for q in model.queue_rows(pts[-1], ["eth0"])), key=lambda q: q.irq_per_s or 0)
    assert eth0.first and eth0.hot_queue == f"{busiest.kind}-{busiest.index}" and eth0.hot_unit == "irq/s"
    assert eth0.hot_rate == busiest.irq_per_s
    assert eth0.hot_cpus == str(busiest.effective[0])  # the effective affinity of its IRQ
    assert eth0.rx_bits and eth0.tx_bits and eth0.rx_bits > eth0.tx_bits
    assert rows["veth0"].hot_unit == "pkt/s" and rows["veth0"].hot_cpus is None  # RPS off on rx-3
    assert len(eth0.trend) == 5  # the first point has no rates


def test_256_cpus_share_one_strip_line_four_to_a_cell():
    rows = [model.CpuRow(c, float(c % 60), 0.0, None, None, 0.0 if c != 77 else 3.0, 0.0, None) for c in range(256)]
    cells, per = model.cpu_strip(rows, 70)
    assert per == 4 and len(cells) == 64
    assert cells[77 // 4][1] == 3  # the dropping CPU makes its cell hot
    assert [r.cpu for r in model.top_cpus(rows, 3)] == [77, 59, 119]
    lines = [line_text(x) for x in cpu_lines(rows, 80, two=True)]
    assert all(len(x) <= 80 for x in lines) and "(4/cell)" in lines[1] and "cpu77" in lines[2]


def test_qdisc_line_sums_the_root_and_leaves_noqueue_out():
    pts = points(4, **LAB)
    qs = model.qdisc_summaries(pts[-1], ["eth0", "veth0", "veth1"])
    assert [(q.ifname, q.kind) for q in qs] == [("eth0", "mq+4 pfifo_fast")]
    assert qs[0].drops_per_s is not None and qs[0].drops > 0


def test_at_80x22_every_figure_group_is_on_screen_and_nothing_is_wider():
    lines = [line_text(x) for x in summary_lines(data_of(points(12, **LAB)), 80, 22)]
    text = "\n".join(lines)
    assert len(lines) <= 22 and all(len(x) <= 80 for x in lines), text
    assert lines[0].startswith(" 3 interfaces") and lines[1].startswith(" eth0 ●"), text
    for needle in ("veth0", "veth1", "veth2", "3 idle: dummy-down(down) ifb0 ifb1", " 2 CPUs softirq",
                   "198.18.0.2", "tcp://198.18.0.6:22", "p99 ms", "loss %", " 5 qdisc", "eth0 mq+4 pfifo_fast"):
        assert needle in text, (needle, text)


def test_a_short_terminal_keeps_every_section_and_counts_what_did_not_fit():
    pts = points(12, veths=8, idle=("ifb0",), ping=("a", "b", "c", "d", "e"))
    lines = [line_text(x) for x in summary_lines(data_of(pts), 80, 14)]
    text = "\n".join(lines)
    assert len(lines) <= 14
    for head in (" 3 interfaces", " 2 CPUs", " 4 latency", " 5 qdisc"):
        assert any(x.startswith(head) for x in lines), (head, text)
    assert re.search(r"\+\d more, 1 idle: .*ifb0", text) and text.index("eth0 ●") < text.index("veth5"), text
    assert re.search(r"^ 4 latency \+4 .*\n a ", text, re.M), text  # one target, the others counted  # the interfaces that did not fit, counted


# --- the app ------------------------------------------------------------------------------


async def drawn(app: NettopApp, src: ScriptedSource, size=(80, 24), ticks: int = 12, **kw):
    ctx = app.run_test(size=size)
    pilot = await ctx.__aenter__()
    for i in range(ticks):
        src.push(synthetic(i, **{**LAB, **kw}))
        await pilot.pause()
    await pilot.pause()
    return ctx, pilot


async def test_at_80x24_the_summary_is_the_screen_and_the_panels_are_one_key_away():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src)
    try:
        summary = app.query_one("#summary")
        assert summary.display and not app.query_one("#panels").display
        text = "\n".join(app.query_one(SummaryView).text_lines())
        assert "eth0 ●" in text and "198.18.0.2" in text and "▕" in text
        await pilot.press("3")
        assert not summary.display and app.zoomed == "throughput"
        assert app.query_one("#throughput").region.height > 15  # the full panel, zoomed
        await pilot.press("z")
        assert summary.display and app.zoomed is None
        await pilot.press("v")
        assert not summary.display and app.query_one("#panels").display
        await pilot.press("v")
        assert summary.display
        await pilot.press("k")  # tuning needs a queue under a cursor: the summary has none
        await pilot.pause()
        assert any("select a queue" in str(n.message) for n in app._notifications)
    finally:
        await ctx.__aexit__(None, None, None)


def without_finding(app) -> list[str]:
    """The summary's lines after the doctor's line (the scripted host drops packets)."""
    lines = app.query_one(SummaryView).text_lines()
    return lines[1:] if lines and lines[0].startswith(" 7 ") else lines


async def test_the_worst_finding_leads_the_summary_and_7_opens_the_doctor():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src, ticks=4)
    try:
        first = app.query_one(SummaryView).text_lines()[0]
        shown = app._doctor_shown  # what this frame drew
        assert shown, "the scripted host's softnet drops make a finding"
        worst = max(shown, key=lambda f: f.severity)
        assert first.startswith(f" 7 {worst.severity.label} {worst.subject}: "), first
        assert len(first) <= 80 and (len(shown) == 1 or f"+{len(shown) - 1} more" in first), first
        assert f"findings {len(shown)}" in app.query_one("#header").text
        await pilot.press("7")
        await pilot.pause()
        assert not app.summary_shown() and app.zoomed == "doctor"
        assert app.query_one("#doctor").region.height > 5
    finally:
        await ctx.__aexit__(None, None, None)


async def test_at_120x40_the_full_panels_stay_and_v_shows_the_summary():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src, size=(120, 40))
    try:
        assert not app.query_one("#summary").display and app.query_one("#queues").region.height > 5
        await pilot.press("v")
        await pilot.pause()
        assert app.query_one("#summary").display
        assert without_finding(app)[0].startswith(" 3 interfaces")
    finally:
        await ctx.__aexit__(None, None, None)


async def test_resizing_the_terminal_switches_between_summary_and_panels():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src, size=(120, 40), ticks=4)
    try:
        assert not app.summary_shown()
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert app.summary_shown() and without_finding(app)[1].startswith(" eth0 ●")
        await pilot.resize_terminal(130, 40)
        await pilot.pause(0.2)
        assert not app.summary_shown() and app.query_one("#queues").region.height > 5
    finally:
        await ctx.__aexit__(None, None, None)


async def test_the_default_route_interface_leads_and_picked_idle_links_unfold():
    src = ScriptedSource(routes=(9,))  # veth2's ifindex in the synthetic host
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src)
    try:
        lines = without_finding(app)
        assert lines[1].startswith(" veth2 ●"), lines
        app.picked = frozenset({"eth0", "ifb0"})
        app.redraw()
        await pilot.pause()
        text = "\n".join(app.query_one(SummaryView).text_lines())
        assert " ifb0 " in text and "idle" not in text and "veth0" not in text, text
    finally:
        await ctx.__aexit__(None, None, None)


async def test_spare_lines_hold_a_throughput_chart_of_the_busiest_interfaces():
    from nettop.tui.charts import ThroughputChart

    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src, ticks=30)
    try:
        chart = app.query_one("#summary-chart", ThroughputChart)
        assert chart.display and chart.region.height >= 6
        legend = chart.text_lines()[0]
        point = app.latest
        busiest = model.busiest(point.rates, model.shown_interfaces(point.snapshot, None), 2)
        assert all(f"━━ {n} " in legend for n in busiest), (busiest, legend)
        assert app.query_one(SummaryView).region.height == len(app.query_one(SummaryView).text_lines())
    finally:
        await ctx.__aexit__(None, None, None)
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src, ticks=4, size=(80, 18))  # no room for it: no chart
    try:
        assert not app.query_one("#summary-chart").display
    finally:
        await ctx.__aexit__(None, None, None)


async def test_a_quiet_tick_rewrites_no_summary_line():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src)
    try:
        view = app.query_one(SummaryView)
        refreshed: list[object] = []
        original = view.refresh

        def spy(*regions: object, **kw: object) -> object:
            refreshed.extend(regions or ["all"])
            return original(*regions, **kw)

        view.refresh = spy  # type: ignore[method-assign]
        app.redraw()  # the same point again
        await pilot.pause()
        assert refreshed == []
        src.push(synthetic(12, **LAB))
        await pilot.pause()
        assert refreshed and all(getattr(r, "height", 0) == 1 for r in refreshed)  # line by line
    finally:
        await ctx.__aexit__(None, None, None)


async def test_help_descriptions_wrap_under_their_own_column_at_80_columns():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await drawn(app, src, ticks=2)
    try:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        lines = ["".join(s.text for s in keys.render_line(y)) for y in range(keys.size.height)]
        start = lines[0].index("this help")
        continued = [x for x in lines if x.strip() and not x[0].strip()]
        assert continued, lines  # some descriptions wrap at 80 columns
        for x in continued:  # and each continuation starts under the descriptions
            assert len(x) - len(x.lstrip()) >= start or x.lstrip()[:1].isalpha() is False, x
        assert all(len(x) - len(x.lstrip()) in (start, 0) or not x.strip() for x in lines), lines
    finally:
        await ctx.__aexit__(None, None, None)


# --- the default route from the kernel ------------------------------------------------------


def test_default_route_of_this_host_is_read_over_rtnetlink():
    import socket

    found = read_default_ifindexes()
    ip = shutil.which("ip")
    if ip is None:
        pytest.skip("iproute2 is needed to cross-check the route")
    out = subprocess.run([ip, "-o", "route", "show", "default"], capture_output=True, text=True).stdout
    want = [socket.if_nametoindex(w.split()[w.split().index("dev") + 1]) for w in out.splitlines() if " dev " in w]
    assert set(want) <= set(found), (out, found)


def test_a_namespace_default_route_via_the_lab_veth(veth_lab):
    """In the lab namespace the only default route leaves by its veth end (eth1 there)."""
    veth_lab.ns_run(["ip", "route", "add", "default", "via", veth_lab.host_ip])
    code = ("import socket; from nettop.kernel.routes import read_default_ifindexes; "
            "print(read_default_ifindexes() == (socket.if_nametoindex('eth1'),))")
    out = veth_lab.ns_run([sys.executable, "-c", code]).stdout
    assert out.strip() == "True", out


def test_multipath_and_metrics_order_the_default_interfaces():
    from nettop.kernel.routes import Route

    routes = [Route(10, 0, 254, 1, 1024, (4,)), Route(2, 0, 254, 1, 100, (7, 4)), Route(2, 24, 254, 1, 0, (9,)),
              Route(2, 0, 255, 1, 0, (1,))]
    assert default_ifindexes(routes) == (7, 4)
