"""SVG snapshots of every screen at 80x24 and 160x48 in each shipped theme.

The data is the synthetic host of `nettop.tui.scripted` pushed tick by tick, so the
pictures hold no real clock, hostname or CPU %; update them with
`pytest --snapshot-update tests/test_tui_snapshots.py` after a deliberate change and look
at the report before committing.
"""

from __future__ import annotations

import pytest

from nettop.collectors.session_path import Peer, SessionPath
from nettop.tui.app import NettopApp
from nettop.tui.scripted import ROOT_PROBLEMS, ScriptedSource, synthetic
from nettop.tui.themes import THEME_ORDER

SIZES = [(80, 24), (160, 48)]
LAB_SIZES = [(80, 24), (120, 40)]  # the summary (default below 120x34) and the full panels
LAB = dict(veths=3, idle=("ifb0", "ifb1", "dummy-down"), ping=("198.18.0.2", "tcp://198.18.0.6:22"))


def panel(key: str, size: tuple[int, int]) -> list[str]:
    """The keys that fill the screen with one panel: from the summary its number alone
    (the panel opens zoomed), from the panel grid its number then z."""
    return [key] if size[0] < 120 or size[1] < 34 else [key, "z"]


def feed(ticks: int = 20, **kw):
    async def run_before(pilot) -> None:
        for i in range(ticks):
            pilot.app.source.push(synthetic(i, **kw))
            await pilot.pause()
    return run_before


def app_in(theme: str, **source_kw) -> NettopApp:
    app = NettopApp(ScriptedSource(**source_kw))
    app.theme = theme
    return app


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen(snap_compare, theme, size):
    assert snap_compare(app_in(theme), terminal_size=size, run_before=feed())


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", LAB_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_three_lab_veths_idle_links_and_two_targets(snap_compare, theme, size):
    """What an operator sees first at 80x24 (the summary: eth0 first, the busy veths,
    the idle links folded, CPUs, RTT, qdisc) and at 120x40 (the full panels)."""
    assert snap_compare(app_in(theme), terminal_size=size, run_before=feed(20, **LAB))


@pytest.mark.parametrize("size", LAB_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_ssh_sessions_interface_is_marked(snap_compare, size):
    """Inside an SSH session (as sshd's SSH_CONNECTION names it) the interface that
    carries it leads the summary and the throughput table with ◆, and the header says
    so: a change on it is applied on trial (tests/test_ssh_tui.py checks a real one)."""
    app = app_in(THEME_ORDER[0])
    app.source.session_path = SessionPath(Peer("198.51.100.7", 52022, "192.0.2.10", 22, "SSH_CONNECTION"),
                                          "eth0", ("eth0",), ("eth0",))
    assert snap_compare(app, terminal_size=size, run_before=feed(20, **LAB))


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen(snap_compare, theme, size):
    assert snap_compare(app_in(theme), terminal_size=size, run_before=feed(3), press=["question_mark"])


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_interface_picker(snap_compare, theme, size):
    assert snap_compare(app_in(theme), terminal_size=size, run_before=feed(3), press=["i", "down"])


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_zoomed_throughput_panel(snap_compare, theme, size):
    assert snap_compare(app_in(theme), terminal_size=size, run_before=feed(40), press=panel("3", size))


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_non_root_notice(snap_compare, theme, size):
    app = app_in(theme, is_root=False, mode="read-only")
    assert snap_compare(app, terminal_size=size, run_before=feed(3, problems=ROOT_PROBLEMS))


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_256_cpu_heatmap_filtered_to_the_nic_node(snap_compare, theme, size):
    app = app_in(theme, cpu_nodes={c: c // 64 for c in range(256)})
    assert snap_compare(app, terminal_size=size, run_before=feed(3, cpus=256), press=[*panel("2", size), "n"])


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_latency_panel_with_two_targets(snap_compare, theme, size):
    app = app_in(theme)
    assert snap_compare(app, terminal_size=size, press=panel("4", size),
                        run_before=feed(30, ping=("198.18.0.2", "tcp://198.18.0.2:22")))


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ebpf_panel_with_recorded_probe_figures(snap_compare, theme, size):
    assert snap_compare(app_in(theme), terminal_size=size, run_before=feed(3, ebpf=True), press=panel("6", size))


def tuning_app(tmp_path, theme: str) -> NettopApp:
    """A live-mode app whose Tuner may open its screens (nothing here applies a change)."""
    from nettop.actions import Journal, Tuner

    app = NettopApp(ScriptedSource(), tuner=Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None))
    app.theme = theme
    return app


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rps_mask_editor(snap_compare, theme, size, tmp_path):
    assert snap_compare(tuning_app(tmp_path, theme), terminal_size=size, run_before=feed(3),
                        press=["1", "down", "k", "1", "2", "right"])


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_before_after_a_change(snap_compare, theme, size, tmp_path):
    from nettop.model.timeline import Event

    async def run_before(pilot) -> None:
        src = pilot.app.source
        for i in range(20):
            src.push(synthetic(i))
            if i == 10:
                src.add_event(Event(synthetic(i).t_wall, "tuning", "rps_cpus eth0 rx-0: 0 (off) → f (CPUs 0-3)"))
            await pilot.pause()

    assert snap_compare(tuning_app(tmp_path, theme), terminal_size=size, run_before=run_before, press=["b"])


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_replay_at_a_tuning_change(snap_compare, theme, size, tmp_path):
    """The replay screen: header with the recorded host and time, the notice, the event
    marker on the charts, after jumping to the recorded tuning change."""
    from nettop.record.replay import ReplaySource
    from nettop.record.store import Writer
    from nettop.model.timeline import Event
    from nettop.tui.scripted import T_WALL0

    path = str(tmp_path / "incident.nettop")
    w = Writer(path, {"host": "lab-host", "interval_s": 1.0, "cpu_nodes": {"0": 0}})
    for i in range(60):
        ev = [Event(T_WALL0 + i, "tuning", "#1 set: rps_cpus eth0 rx-0 0 → f")] if i == 40 else []
        w.add_sample(synthetic(i, cpus=2), ev)
    w.close()
    src = ReplaySource(path, speed=4)
    src.paused = True
    app = NettopApp(src)
    app.theme = theme

    async def run_before(pilot) -> None:
        for _ in range(3):  # opening, then the jump: each move runs on a worker
            await app.workers.wait_for_complete()
            await pilot.pause()
        await pilot.press("right_square_bracket")
        for _ in range(200):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if not app.seeking and not app.workers and app.latest is not None:
                break

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def with_experiment_bar(ticks: int = 20):
    """The live view while an experiment runs: the panels above, its progress bar below."""
    from nettop.tui.experiment_keys import bar_text

    async def run_before(pilot) -> None:
        await feed(ticks)(pilot)
        pilot.app._set_bar(bar_text(3, 8, "tbf-long-queue #2: load on"))
        await pilot.pause()
    return run_before


def result_rows():
    """Rows as the lab's queue-length plan gives them (figures from docs/experiments.md)."""
    from nettop.experiment.table import Row, Spread

    def row(name, tput, p50, p99, drops, retrans, failed=0, failures=()):
        figs = {"tput_bps": tput, "rtt_load_p50": p50, "rtt_load_p99": p99, "loss_load_pct": 0.0,
                "drops_per_s": drops, "softirq_pct": 12.0, "retransmits": retrans}
        return Row(name, 2, failed, {k: Spread(v, v * 0.9, v * 1.1, 2) for k, v in figs.items()}, failures)
    return [row("baseline", 17.6e9, 0.04, 0.06, 0.0, 418), row("tbf-short-queue", 19.2e6, 2.25, 5.17, 431.4, 2314),
            row("tbf-long-queue", 19.9e6, 58.0, 142.92, 0.0, 2047),
            row("cut", 8.0, 0.0, 0.0, 0.0, 0, 1, ("100% probe loss to 198.18.0.2: no reply for 3.0 s",))]


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", LAB_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_experiment_progress_bar_under_the_live_panels(snap_compare, theme, size):
    assert snap_compare(app_in(theme), terminal_size=size, run_before=with_experiment_bar())


@pytest.mark.parametrize("theme", THEME_ORDER)
@pytest.mark.parametrize("size", LAB_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_experiment_results_table(snap_compare, theme, size):
    from nettop.tui.experiment_keys import ResultScreen

    async def run_before(pilot) -> None:
        await feed(3)(pilot)
        pilot.app.push_screen(ResultScreen("queue length behind a 20 Mbit/s shaper", result_rows(), "wrote experiment-1/results.md, results.csv, charts.txt "
                                                         "and the recording experiment-1/run.nettop · escape closes"))
        await pilot.pause()
    assert snap_compare(app_in(theme), terminal_size=size, run_before=run_before)


@pytest.fixture(scope="module")
def host_1024(tmp_path_factory):
    """Three seconds of a generated 1,024-CPU host on 4 NUMA nodes with CPUs 1000-1003
    offline (treegen, the load moving each second), read by the real HostReader; clocks
    and the read's own CPU time are pinned so the picture holds no real time."""
    import dataclasses

    from nettop.collectors.host import HostReader
    from nettop.kernel.sysroot import SysRoot
    from numa_tree import set_nodes
    from treegen import generate_tree

    snaps, nodes = [], {}
    for step in range(3):
        dest = generate_tree(tmp_path_factory.mktemp(f"h1024_{step}"), cpus=1024, irqs=2048, queues=128,
                             offline=range(1000, 1004), step=step, wave=True)
        nodes = set_nodes(dest, 1024)
        with HostReader(SysRoot(str(dest))) as reader:
            snap = reader.read()
        snaps.append(dataclasses.replace(snap, t_mono=1000.0 + step, t_wall=1_767_225_600.0 + step, read_cpu_s=0.004))
    return snaps, nodes


def feed_snaps(snaps):
    async def run_before(pilot) -> None:
        for s in snaps:
            pilot.app.source.push(s)
            await pilot.pause()
    return run_before


@pytest.mark.parametrize("size", LAB_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_1024_cpus_by_numa_node(snap_compare, size, host_1024):
    """The summary's strip (80x24) and the CPU panel's heatmap (120x40): one row or strip
    segment per node, the busiest CPUs named with their node, 1000-1003 offline."""
    snaps, nodes = host_1024
    assert snap_compare(NettopApp(ScriptedSource(cpu_nodes=nodes)), terminal_size=size, run_before=feed_snaps(snaps))


def test_1024_cpus_panel_zoomed_at_80x24(snap_compare, host_1024):
    snaps, nodes = host_1024
    assert snap_compare(NettopApp(ScriptedSource(cpu_nodes=nodes)), terminal_size=(80, 24),
                        run_before=feed_snaps(snaps), press=["2"])
