"""The live app driven by a scripted source: every key binding, in-place updates, bursts.

No timers run here: each test pushes snapshots of the synthetic host and waits for the
app to draw them, so the results never depend on the machine's speed or clock.
"""

from __future__ import annotations

import pytest
from textual.command import CommandPalette

from nettop.model.timeline import Event
from nettop.tui.app import NO_LATENCY, NettopApp, next_interval
from nettop.tui.charts import CpuHeatmap, LatencyChart
from nettop.tui.screens import HelpScreen, InterfacePicker
from nettop.tui.scripted import ROOT_PROBLEMS, ScriptedSource, synthetic
from nettop.tui.tables import PAD, CpuTable, IfaceTable, LatencyTable, QdiscTable, QueueTable

SIZE = (120, 40)


async def started(app: NettopApp, src: ScriptedSource, ticks: int = 4, size=SIZE, **kw):
    ctx = app.run_test(size=size)
    pilot = await ctx.__aenter__()
    for i in range(ticks):
        src.push(synthetic(i, **kw))
        await pilot.pause()
    return ctx, pilot


@pytest.fixture
async def running():
    """An app at 120x40 that has drawn 4 ticks of the synthetic 4-CPU host."""
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await started(app, src)
    yield app, src, pilot
    await ctx.__aexit__(None, None, None)


def text_of(app: NettopApp, selector: str) -> str:
    return str(app.query_one(selector).render())


def plain(static) -> str:
    """A Static's text on one wide line per row (no wrapping), e.g. the help's key grid."""
    import io

    from rich.console import Console

    console = Console(width=400, record=True, file=io.StringIO())
    console.print(static.content)
    return console.export_text()


def row_keys(table) -> list[str]:
    return table.row_keys()


# --- data ---------------------------------------------------------------------------


async def test_queue_rows_are_keyed_by_interface_kind_and_index(running):
    app, src, pilot = running
    table = app.query_one(QueueTable)
    assert row_keys(table)[:2] == ["eth0/rx/0", "eth0/tx/0"]
    assert "veth0/rx/3" in row_keys(table) and not any(k.startswith("lo/") for k in row_keys(table))
    row = [table.cell("eth0/rx/1", c)[0] for c in ("queue", "irq", "cpus", "rps", "xps")]
    assert row == ["eth0 rx-1", "41", "1", "0", ""]


async def test_a_new_tick_rewrites_only_changed_cells_in_place(running):
    app, src, pilot = running
    table = app.query_one(QueueTable)
    keys_before = row_keys(table)
    irq_before = table.cell("eth0/rx/0", "irq_s")
    src.push(synthetic(4))
    await pilot.pause()
    assert row_keys(table) == keys_before  # same rows, same order: updated, not rebuilt
    assert table.cell("eth0/rx/0", "irq_s") != irq_before
    n = table.cell_updates
    app.redraw()  # the same point again: nothing changed, so nothing is written
    await pilot.pause()
    assert table.cell_updates == n


async def test_a_burst_of_samples_draws_once_with_the_newest():
    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        for i in range(50):  # the sampler produced 50 points before the UI got a turn
            src.push(synthetic(i))
        await pilot.pause()
        assert app.frames == 1
        assert src.superseded == 49
        assert app.latest is not None and app.latest.snapshot.t_wall == synthetic(49).t_wall
        assert "00:00:49 UTC" in text_of(app, "#header")


async def test_header_shows_host_kernel_interval_mode_and_own_cpu(running):
    app, src, pilot = running
    header = text_of(app, "#header")
    for part in ("nettop live", "every 1s", "nettop CPU 1.5%", "lab-host", "6.18.0-nettop-test"):
        assert part in header


async def test_mode_comes_from_the_source():
    src = ScriptedSource(mode="replay")
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 2)
    assert "nettop replay" in text_of(app, "#header")
    await ctx.__aexit__(None, None, None)


async def test_non_root_notice_names_what_needs_root():
    src = ScriptedSource(is_root=False)
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 2, problems=ROOT_PROBLEMS)
    notice = app.query_one("#notice")
    assert notice.display
    assert "not root" in text_of(app, "#notice") and "ethtool eth0" in text_of(app, "#notice")
    await ctx.__aexit__(None, None, None)


async def test_root_without_permission_problems_has_no_notice(running):
    app, src, pilot = running
    assert not app.query_one("#notice").display


async def test_cpu_hot_cells_use_the_theme_component_styles(running):
    app, src, pilot = running
    table = app.query_one(CpuTable)
    hot = table.get_component_rich_style("cell--hot", partial=True)
    text, level = table.cell("3", "drop")  # CPU 3 drops packets in the synthetic host
    assert level == "hot" and table.cell_style(level) == hot and hot.bold and hot.underline
    line = table.render_line(1 + 3)  # header + rows of CPUs 0..2
    assert any(seg.text.strip() == text and seg.style is not None and seg.style.underline for seg in line)


async def test_latency_panel_shows_the_empty_state_until_latency_arrives(running):
    app, src, pilot = running
    assert NO_LATENCY in text_of(app, "#latency-empty")
    assert not app.query_one(LatencyChart).display


async def test_latency_is_plotted_and_tabled_when_snapshots_carry_it():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 8, ping=("198.18.0.2", "tcp://198.18.0.2:22"))
    assert app.query_one(LatencyChart).display and not app.query_one("#latency-empty").display
    table = app.query_one(LatencyTable)
    assert table.row_keys() == ["198.18.0.2", "tcp://198.18.0.2:22"]
    stats = src.timeline.latest().snapshot.latency["198.18.0.2"]
    assert table.cell("198.18.0.2", "avg")[0] == f"{stats.rtt_avg_ms:.2f}"
    assert table.cell("198.18.0.2", "note")[0] == f"{stats.received}/{stats.sent}"
    await ctx.__aexit__(None, None, None)


async def test_a_long_target_name_is_cut_so_the_latency_figures_stay_in_the_panel():
    """Wide at 160 columns, then the terminal shrinks to 120: the column shrinks with it."""
    long = "tcp://monitoring-gateway.example.net:8443"
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 8, size=(160, 50), ping=("198.18.0.2", long))
    table = app.query_one(LatencyTable)
    wide = table.virtual_size.width
    await pilot.resize_terminal(120, 40)
    await pilot.pause()
    src.push(synthetic(8, ping=("198.18.0.2", long)))  # sized against the laid-out panel
    await pilot.pause()
    assert 0 < table.virtual_size.width <= table.scrollable_content_region.width < wide  # no sideways scroll
    stats = src.timeline.latest().snapshot.latency[long]
    rows = [table.render_line(y).text for y in range(3)]
    assert rows[0].rstrip().endswith("replies")
    line = next(r for r in rows if r.lstrip().startswith("tcp://"))
    assert "…" in line and line.rstrip().endswith(f"{stats.received}/{stats.sent}")
    await ctx.__aexit__(None, None, None)


def test_a_table_shows_whole_columns_only_and_the_last_ones_blank_may_fall_outside():
    q = QdiscTable()
    total = q.shown_width(10_000)
    assert total == sum(w + 2 * PAD for _, _, w in QdiscTable.COLUMNS)
    assert q.shown_width(total - PAD) == total  # only the trailing blank is outside
    ends = [q._x[k] + w + 2 * PAD for k, _, w in QdiscTable.COLUMNS]
    for room in range(ends[0] - PAD, total - PAD):
        shown = q.shown_width(room)
        assert shown in ends and shown - PAD <= room < ends[ends.index(shown) + 1] - PAD
    assert q.shown_width(5) == 5  # not even the first column: it is cut ("…")


async def test_columns_that_do_not_fit_a_half_width_panel_are_left_out_and_marked():
    """120x40: the qdisc panel has no room for requeues; it is left out, not cut, the
    header says so with "›", no row is lost to a sideways scrollbar, and z shows it."""
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 8, size=(120, 40), veths=3, idle=("ifb0", "dummy-down"))
    qdisc, ifaces = app.query_one(QdiscTable), app.query_one(IfaceTable)
    head = qdisc.render_line(0).text
    assert head.rstrip().endswith("drop/s›") and "requeues" not in head
    assert all("requeues" not in qdisc.render_line(y).text for y in range(qdisc.size.height))
    assert not qdisc.show_horizontal_scrollbar and not ifaces.show_horizontal_scrollbar
    assert ifaces.render_line(0).text.rstrip().endswith("drop/s")  # fits: no mark
    shown = [ifaces.render_line(y).text.split()[0] for y in range(1, ifaces.size.height)]
    assert "dummy-down" in shown  # the row a horizontal scrollbar used to cover
    await pilot.press("5", "z")
    await pilot.pause()
    assert qdisc.render_line(0).text.rstrip().endswith("requeues")
    await ctx.__aexit__(None, None, None)


async def test_many_cpus_switch_to_the_heatmap():
    src = ScriptedSource(cpu_nodes={c: c // 32 for c in range(64)})
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 3, cpus=64)
    assert app.query_one(CpuHeatmap).display and not app.query_one(CpuTable).display
    assert "64 CPUs" in str(app.query_one(CpuHeatmap).render())
    await ctx.__aexit__(None, None, None)


# --- keys ---------------------------------------------------------------------------


async def test_question_mark_opens_help_listing_every_key(running):
    app, src, pilot = running
    await pilot.press("question_mark")
    assert isinstance(app.screen, HelpScreen)
    text = plain(app.screen.query_one("#help-keys"))
    live_keys = [b for b in app.BINDINGS if not b.tooltip.startswith("replay:")]
    for b in live_keys:
        assert b.tooltip in text, b.action
    for key in ("space / p", "+ / =", "-", "ctrl+p", "tab / shift+tab", "R "):
        assert key in text
    assert "replay:" not in text  # the replay keys belong to replays only
    await pilot.press("escape")
    assert not isinstance(app.screen, HelpScreen)


@pytest.mark.parametrize("key", ["space", "p"])
async def test_space_and_p_pause_and_resume(running, key):
    app, src, pilot = running
    await pilot.press(key)
    assert src.paused and "nettop PAUSED" in text_of(app, "#header")
    await pilot.press(key)
    assert not src.paused and "nettop live" in text_of(app, "#header")


async def test_plus_and_minus_step_the_interval(running):
    app, src, pilot = running
    await pilot.press("plus")
    assert src.interval == 2.0 and "every 2s" in text_of(app, "#header")
    await pilot.press("equals_sign")
    assert src.interval == 5.0
    await pilot.press("minus", "minus", "minus", "minus", "minus", "minus")
    assert src.interval == 0.1


def test_interval_ladder_ends():
    assert next_interval(60.0, 1) == 60.0
    assert next_interval(0.1, -1) == 0.1
    assert next_interval(0.3, 1) == 0.5 and next_interval(0.3, -1) == 0.2


async def test_i_picks_interfaces(running):
    app, src, pilot = running
    await pilot.press("i")
    assert isinstance(app.screen, InterfacePicker)
    await pilot.press("down", "down", "space", "enter")  # eth0, lo, veth0: untick veth0
    assert app.picked == frozenset({"eth0"})
    await pilot.pause()
    assert not any(k.startswith("veth0/") for k in row_keys(app.query_one(QueueTable)))
    await pilot.press("i", "a", "enter")
    await pilot.pause()
    assert app.picked == frozenset({"eth0", "lo", "veth0"})


async def test_escape_leaves_the_interface_pick_unchanged(running):
    app, src, pilot = running
    await pilot.press("i", "space", "escape")
    assert app.picked is None and not isinstance(app.screen, InterfacePicker)


async def test_z_zooms_the_focused_panel_and_back(running):
    app, src, pilot = running
    await pilot.press("2", "z")
    assert app.zoomed == "cpus"
    assert app.query_one("#cpus").display
    assert app.query_one("#queues").styles.display == "none"
    await pilot.press("3")  # a panel key while zoomed shows that panel instead
    assert app.zoomed == "throughput" and app.query_one("#cpus").styles.display == "none"
    await pilot.press("z")
    assert app.zoomed is None and app.query_one("#queues").styles.display == "block"


@pytest.mark.parametrize("key,panel", [("1", "queues"), ("2", "cpus"), ("3", "throughput"),
                                       ("4", "latency"), ("5", "qdisc")])
async def test_number_keys_go_to_panels(running, key, panel):
    app, src, pilot = running
    await pilot.press(key)
    assert app.current_panel() == panel


async def test_tab_moves_between_panels(running):
    app, src, pilot = running
    assert app.current_panel() == "queues"
    await pilot.press("tab")
    assert app.current_panel() == "cpus"


async def test_t_cycles_the_shipped_themes_and_restyles_hot_cells(running):
    app, src, pilot = running
    table = app.query_one(CpuTable)
    assert app.theme == "nettop-dark"
    dark_hot = table.cell_style("hot")
    await pilot.press("t")
    await pilot.pause()
    assert app.theme == "nettop-light"
    light_hot = table.cell_style("hot")
    assert light_hot != dark_hot and light_hot == table.get_component_rich_style("cell--hot", partial=True)
    await pilot.press("t")
    assert app.theme == "nettop-mono"
    await pilot.press("t")
    assert app.theme == "nettop-dark"


async def test_s_cycles_the_queue_sort_and_r_reverses(running):
    app, src, pilot = running
    table = app.query_one(QueueTable)
    await pilot.press("s")
    await pilot.pause()
    assert app.sort_mode == "irq/s"
    shown = [table.cell(k, "irq_s")[0] for k in row_keys(table) if k.startswith("eth0")]
    rates = [float(v.rstrip("k")) * (1000 if v.endswith("k") else 1) for v in shown]
    assert rates == sorted(rates, reverse=True)
    assert "sort: irq/s" in str(app.query_one("#queues").border_title)
    await pilot.press("r")
    await pilot.pause()
    assert row_keys(table)[0].startswith("veth0")  # no IRQs: last when descending, first reversed
    await pilot.press("s", "s", "s", "s")
    assert app.sort_mode == "queue"


async def test_n_filters_cpus_to_the_nics_numa_node():
    src = ScriptedSource(cpu_nodes={c: c // 32 for c in range(64)})
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 3, cpus=64)
    heatmap = app.query_one(CpuHeatmap)
    await pilot.press("n")
    await pilot.pause()
    assert [int(text.split()[0]) for text, _ in heatmap._cells] == list(range(32))  # eth0 sits on node 0
    assert "32 CPUs on the NIC's node" in str(heatmap.render())
    await pilot.press("n")
    await pilot.pause()
    assert len(heatmap._cells) == 64
    await ctx.__aexit__(None, None, None)


async def test_m_puts_an_event_marker_on_the_charts(running):
    app, src, pilot = running
    src.add_event(Event(synthetic(2).t_wall, "tuning", "rps_cpus eth0 rx-0 0 -> f"))
    await pilot.press("m")
    events = src.timeline.events()
    assert [e.kind for e in events][-2:] == ["tuning", "mark"]
    from nettop.tui import model
    assert model.event_offsets(events, app.latest.snapshot, app.window_s) == [-1.0, 0.0]


async def test_ctrl_p_opens_the_command_palette_with_nettop_commands(running):
    app, src, pilot = running
    await pilot.press("ctrl+p")
    await pilot.pause()
    assert isinstance(app.screen, CommandPalette)
    await pilot.press(*"nettop: zoom")
    await pilot.pause(0.3)
    await pilot.press("enter")
    await pilot.pause()
    assert app.zoomed == "queues"


async def test_q_quits_and_stops_the_source():
    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        await pilot.press("q")
        await pilot.pause()
    assert src.started and src.stopped


async def test_no_color_selects_the_monochrome_theme(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=SIZE):
        assert app.theme == "nettop-mono"


async def test_80x24_stacks_panels_in_a_scrollable_column():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 3, size=(80, 24))
    assert app.screen.has_class("-narrow")
    await pilot.press("v")  # the panels instead of the summary
    await pilot.pause()
    panels = app.query_one("#panels")
    assert panels.styles.layout.name == "vertical" and panels.max_scroll_y > 0
    await pilot.press("5")
    await pilot.pause()
    assert app.query_one("#qdisc").region.y < 24  # jumping to a panel scrolls it into view
    await ctx.__aexit__(None, None, None)


async def test_large_terminal_shows_every_panel_at_once():
    src = ScriptedSource()
    app = NettopApp(src)
    ctx, pilot = await started(app, src, 3, size=(160, 48))
    for panel in ("queues", "cpus", "throughput", "latency", "qdisc"):
        region = app.query_one(f"#{panel}").region
        assert region.height > 3 and region.bottom <= 48, panel
    await ctx.__aexit__(None, None, None)
