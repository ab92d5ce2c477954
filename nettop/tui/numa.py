"""The CPUs of a big host grouped by NUMA node: one row per node, CPUs folded into cells.

A 1,024-CPU host drawn one cell per CPU fills eighty lines; what the operator asks there
is which socket is loaded, which CPUs are the hottest and which are offline. So above
`NODE_VIEW_ABOVE_CPUS` the heatmap and the summary's strip show each node as one row of
cells, each cell the *highest* softirq % (and heat level) of a run of consecutive CPUs
of that node (the mean would hide the one saturated CPU that drops packets), name the
busiest CPUs with their node, and mark offline CPUs. Smaller hosts keep one cell per CPU.

Pure functions of `CpuRow`s and the CPU -> node map, O(CPUs) per tick; the text lines
use the summary's roles (heat-N, muted) so the summary and the heatmap read alike.
"""

from __future__ import annotations

import heapq
import operator
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Mapping, Sequence

from nettop.tui import format as fmt
from nettop.tui.model import CpuRow, heat_level

_CPU, _PCT, _OFF, _DROPPED = (operator.attrgetter(f) for f in ("cpu", "softirq_pct", "offline", "dropped_per_s"))
NODE_VIEW_ABOVE_CPUS = 64  # hosts up to this many CPUs keep one cell per CPU
OFFLINE_LEVEL = -1  # the level of a cell whose CPUs are all offline


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One NUMA node's CPUs as cells of `per` CPUs each (the last cell may hold fewer)."""

    node: int | None  # None: CPUs whose node is unknown (a kernel without NUMA)
    cpus: tuple[int, ...]  # every CPU of the node, offline ones included, in id order
    cells: tuple[tuple[float | None, int], ...]  # (highest softirq %, highest heat level)
    per: int
    offline: int
    avg_pct: float | None  # mean softirq % of the node's online CPUs
    hottest: CpuRow | None

    @property
    def label(self) -> str:
        return "all" if self.node is None else f"n{self.node}"


def node_view(rows: Sequence[CpuRow]) -> bool:
    """Whether the CPUs are drawn grouped by node rather than one cell per CPU."""
    return len(rows) > NODE_VIEW_ABOVE_CPUS


def with_offline(rows: Sequence[CpuRow], cpu_nodes: Mapping[int, int]) -> list[CpuRow]:
    """`rows` plus an offline row for each CPU a node lists that has no row (offline
    CPUs are absent from /proc/stat); in CPU order. A CPU no file names is not invented."""
    known = {r.cpu for r in rows}
    extra = [CpuRow(c, None, None, None, None, None, None, None, offline=True)
             for c in cpu_nodes if c not in known]
    if not extra:
        return list(rows)
    return sorted([*rows, *extra], key=lambda r: r.cpu)


def by_node(rows: Sequence[CpuRow], cpu_nodes: Mapping[int, int]) -> list[tuple[int | None, list[CpuRow]]]:
    """The rows of each node, nodes in order; CPUs of unknown node last (or alone). A
    few C-level passes per node, not a Python step per CPU (1,024 a tick)."""
    nodes = list(map(cpu_nodes.get, map(_CPU, rows)))
    return [(node, list(compress(rows, map(operator.eq, nodes, repeat(node)))))
            for node in sorted(set(nodes), key=lambda k: (k is None, k or 0))]


def cells_of(rows: Sequence[CpuRow], per: int) -> tuple[tuple[float | None, int], ...]:
    out: list[tuple[float | None, int]] = []
    for i in range(0, len(rows), per):
        group = [r for r in rows[i:i + per] if not r.offline]
        if not group:
            out.append((None, OFFLINE_LEVEL))
            continue
        known = [r.softirq_pct for r in group if r.softirq_pct is not None]
        out.append((max(known) if known else None, max(heat_level(r) for r in group)))
    return tuple(out)


def hottest_first(rows: Sequence[CpuRow], n: int | None = None) -> list[CpuRow]:
    """The `n` hottest online CPUs with a figure (all with None), those dropping packets
    first, then by softirq %, then by CPU id; `n` takes them without sorting a thousand
    rows. The keys are made in C-level passes over the rows' fields (a key function was
    2,000 Python calls a tick at 1,024 CPUs)."""
    pct = list(map(_PCT, rows))
    ok = list(map(operator.and_, map(operator.is_not, pct, repeat(None)), map(operator.not_, map(_OFF, rows))))
    known = list(compress(rows, ok))
    keys = zip(map(operator.not_, map(_DROPPED, known)), map(operator.neg, compress(pct, ok)),
               map(_CPU, known), range(len(known)))
    if n == 1:
        return [known[min(keys)[3]]] if known else []
    picked = heapq.nsmallest(n, keys) if n is not None else sorted(keys)
    return [known[k[3]] for k in picked]


def node_rows(rows: Sequence[CpuRow], cpu_nodes: Mapping[int, int], cells: int,
              groups: list[tuple[int | None, list[CpuRow]]] | None = None) -> list[NodeRow]:
    """Each node as at most `cells` cells; every node uses the same CPUs per cell (the
    biggest node's need), so a cell stands for as many CPUs on every row. `groups`:
    `by_node` of the same rows, when the caller has it."""
    if groups is None:
        groups = by_node(rows, cpu_nodes)
    widest = max((len(g) for _, g in groups), default=0)
    per = max(1, -(-widest // max(1, cells)))
    out = []
    for node, group in groups:
        online = [r.softirq_pct for r in group if not r.offline and r.softirq_pct is not None]
        top = hottest_first(group, 1)
        out.append(NodeRow(
            node=node, cpus=tuple(r.cpu for r in group), cells=cells_of(group, per), per=per,
            offline=sum(1 for r in group if r.offline),
            avg_pct=sum(online) / len(online) if online else None, hottest=top[0] if top else None))
    return out


def offline_ids(rows: Sequence[CpuRow]) -> list[int]:
    return [r.cpu for r in rows if r.offline]


# --- as text: (text, role) runs, the roles of the summary (heat-N, muted) -----------------

Run = tuple[str, str]
Line = tuple[Run, ...]
OFFLINE_MARK = "×"


def _cells(cells: Sequence[tuple[float | None, int]]) -> list[Run]:
    from nettop.tui.summary import heat_char  # summary draws its strip with these lines

    return [(OFFLINE_MARK, "muted") if level == OFFLINE_LEVEL else (heat_char(pct), f"heat-{level}")
            for pct, level in cells]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def busiest_runs(rows: Sequence[CpuRow], cpu_nodes: Mapping[int, int], width: int, lead: str) -> Line:
    """`lead` then the hottest CPUs with their node ("cpu700 n2 45.0%"), as many as fit."""
    out: list[Run] = [(lead, "muted")]
    used = len(lead)
    for r in hottest_first(rows, 8):
        node = cpu_nodes.get(r.cpu)
        name = f" cpu{r.cpu}" + (f" n{node} " if node is not None else " ")
        figure = f"{fmt.pct(r.softirq_pct)}%"
        if used + len(name) + len(figure) > width:
            break
        out += [(name, ""), (figure, f"heat-{heat_level(r)}")]
        used += len(name) + len(figure)
    return tuple(out)


def heatmap_lines(rows: Sequence[CpuRow], cpu_nodes: Mapping[int, int], width: int, caption: str) -> list[Line]:
    """The CPU panel's heatmap for a big host: the caption (with what a cell stands for
    and the offline CPUs), one line per node (its CPUs, cells, mean and hottest CPU when
    the width allows), then the busiest CPUs by name (then the offline CPUs when the
    caption's line had no room for them)."""
    rows = with_offline(rows, cpu_nodes)
    groups = by_node(rows, cpu_nodes)
    labels = {node: f"{'all' if node is None else f'n{node}'} {fmt.cpu_list(r.cpu for r in g)}"
              for node, g in groups}
    label_w = max((len(t) for t in labels.values()), default=3) + 1
    tail_w = len(" avg 100.0% max cpu1023 100.0%")
    if width - label_w - 2 - tail_w < 16:
        tail_w = 0  # narrow: the cells matter more; the busiest line still names CPUs
    nodes = node_rows(rows, cpu_nodes, max(1, width - label_w - 2 - tail_w), groups)
    per = nodes[0].per if nodes else 1
    off = offline_ids(rows)
    head = caption + (f" · a cell: highest of {per} CPUs" if per > 1 else "")
    gone = f"offline {fmt.cpu_list(off)} ({OFFLINE_MARK})" if off else ""
    if gone and len(head) + 3 + len(gone) <= width:
        head, gone = f"{head} · {gone}", ""
    out: list[Line] = [((_fit(head, width), "muted"),)]
    for n in nodes:
        line: list[Run] = [(labels[n.node].ljust(label_w), "muted"), ("▕", "muted")]
        line += _cells(n.cells)
        line.append(("▏", "muted"))
        if tail_w:
            line.append((f" avg {fmt.pct(n.avg_pct)}%", ""))
            if n.hottest is not None:
                h = n.hottest
                line += [(f" max cpu{h.cpu} ", ""), (f"{fmt.pct(h.softirq_pct)}%", f"heat-{heat_level(h)}")]
        out.append(tuple(line))
    out.append(busiest_runs(rows, cpu_nodes, width, "busiest"))
    if gone:  # not on the caption's line: one of its own
        out.append(((_fit(gone, width), "muted"),))
    return out


def strip_runs(rows: Sequence[CpuRow], cpu_nodes: Mapping[int, int], width: int) -> tuple[list[Run], int]:
    """The summary's one-line strip for a big host: each node's cells after its name
    ("n0▕▂▃▂▏n1▕…"), and how many CPUs a cell stands for (its highest)."""
    rows = with_offline(rows, cpu_nodes)
    groups = by_node(rows, cpu_nodes)
    labels = [f" {'all' if node is None else f'n{node}'}▕" for node, _ in groups]
    tail = " (999/cell)"
    room = width - sum(len(t) + 1 for t in labels) - len(tail)
    nodes = node_rows(rows, cpu_nodes, max(1, room // max(1, len(groups))), groups)
    out: list[Run] = []
    for label, n in zip(labels, nodes):
        out.append((label, "muted"))
        out += _cells(n.cells)
        out.append(("▏", "muted"))
    per = nodes[0].per if nodes else 1
    if per > 1:
        out.append((f" ({per}/cell)", "muted"))
    return out, per
