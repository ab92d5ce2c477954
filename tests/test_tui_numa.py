"""The CPUs of a big host by NUMA node: one row per node, cells of the highest CPU."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.tui import numa
from nettop.tui.model import CpuRow
from nettop.tui.summary import cpu_lines, line_text

NODES = {c: c // 256 for c in range(1024)}
OFFLINE = (1000, 1001, 1002, 1003)


def rows_1024(hot: int = 700, pct: float = 80.0) -> list[CpuRow]:
    """1,024 CPUs at 10 % softirq but `hot`; the offline ones have no row (as /proc/stat)."""
    return [CpuRow(c, pct if c == hot else 10.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
            for c in range(1024) if c not in OFFLINE]


def text(lines) -> list[str]:
    return [line_text(x) for x in lines]


def test_small_hosts_keep_one_cell_per_cpu():
    assert not numa.node_view(rows_1024()[:64])
    assert numa.node_view(rows_1024()[:65])


def test_each_node_is_one_row_and_a_cell_holds_the_highest_of_its_cpus():
    nodes = numa.node_rows(numa.with_offline(rows_1024(), NODES), NODES, 32)
    assert [n.node for n in nodes] == [0, 1, 2, 3]
    assert all(n.per == 8 and len(n.cells) == 32 for n in nodes)
    # cpu700 is the 188th CPU of node 2: its cell shows 80 %, not the mean of eight CPUs
    assert nodes[2].cells[188 // 8] == (80.0, 3)
    assert nodes[2].hottest is not None and nodes[2].hottest.cpu == 700
    assert nodes[0].cells[0] == (10.0, 1)
    assert nodes[3].offline == 4 and nodes[0].offline == 0


def test_a_cell_of_offline_cpus_only_is_marked_and_the_caption_names_them():
    lines = text(numa.heatmap_lines(rows_1024(), NODES, 118, "1020 CPUs, softirq %"))
    assert len(lines) == 6  # caption, four nodes, the busiest
    assert "offline 1000-1003" in lines[0] and "highest of 4 CPUs" in lines[0]
    assert lines[4].startswith("n3 768-1023") and numa.OFFLINE_MARK in lines[4]  # cpus 1000-1003: one cell
    assert "max cpu700 80.0%" in lines[3]
    assert lines[5].startswith("busiest cpu700 n2 80.0%")
    assert all(len(x) <= 118 for x in lines)


def test_at_56_columns_the_node_rows_drop_their_tail_but_keep_every_node():
    lines = text(numa.heatmap_lines(rows_1024(), NODES, 56, "1020 CPUs"))
    assert all(len(x) <= 56 for x in lines), lines
    assert [x.split()[0] for x in lines[1:5]] == ["n0", "n1", "n2", "n3"]
    assert "cpu700 n2" in lines[5]
    assert lines[6] == "offline 1000-1003 (×)"  # no room on the caption's line


def test_the_summary_strip_at_80_columns_is_cut_by_node_and_names_the_hottest_with_its_node():
    lines = text(cpu_lines(rows_1024(), 80, two=True, cpu_nodes=NODES))
    assert len(lines) == 3 and all(len(x) <= 80 for x in lines), lines
    assert "1020 on 4 nodes 4 off" in lines[0] and "avg 10.1%  drop/s" in lines[0]  # the figures are not cut
    assert [p.split("▕")[0] for p in lines[1].split("▏")[:4]] == [" n0", " n1", " n2", " n3"]
    assert "/cell)" in lines[1]
    assert lines[2].startswith(" top cpu700 n2 80.0%")


def test_without_node_facts_the_summary_keeps_its_one_strip():
    lines = text(cpu_lines(rows_1024(), 80, two=True, cpu_nodes={}))
    assert lines[1].startswith(" 0▕") and "▏1023" in lines[1]


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 2047), st.one_of(st.none(), st.integers(0, 7))), max_size=60, unique_by=lambda t: t[0]))
def test_by_node_groups_the_rows_as_a_walk_of_them_does(cpus):
    """The rows of each node in their order, nodes ascending, CPUs of no known node last."""
    from nettop.tui.model import CpuRow

    rows = [CpuRow(c, 1.0, None, None, None, None, None, None) for c, _ in cpus]
    nodes = {c: n for c, n in cpus if n is not None}
    want: dict = {}
    for r in rows:
        want.setdefault(nodes.get(r.cpu), []).append(r)
    assert numa.by_node(rows, nodes) == sorted(want.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))


_FIGURE = st.one_of(st.none(), st.sampled_from([0.0, 0, 5.0, 12.5, 80.0, 0.1]))


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 300), _FIGURE, _FIGURE, st.booleans()), max_size=40, unique_by=lambda t: t[0]),
       st.sampled_from([None, 1, 2, 8]))
def test_hottest_first_orders_as_its_heat_order_does(cpus, n):
    """Dropping CPUs first, then by softirq % down, then by CPU; offline CPUs and those
    without a figure left out; the first `n` of that order."""
    from nettop.tui.model import CpuRow

    rows = [CpuRow(c, pct, None, None, None, dropped, None, None, offline=off) for c, pct, dropped, off in cpus]
    known = [r for r in rows if r.softirq_pct is not None and not r.offline]
    want = sorted(known, key=lambda r: (not r.dropped_per_s, -(r.softirq_pct or 0.0), r.cpu))
    assert numa.hottest_first(rows, n) == (want if n is None else want[:n])
