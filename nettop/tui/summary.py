"""The summary: every figure group on one small screen (the default below 120x34).

An SSH session opens at 80x24, and the first question there is "how much traffic, how
much latency, where are the drops". The summary answers it in one screen, the way htop
and btop put meters above their tables: one line per busy interface (throughput, drops,
the hottest queue and the CPU that serves it), the CPUs as a one-line heat strip with
the hottest by softirq, RTT p50/p99 and loss per target, each qdisc's backlog and
drops. Each section's heading carries the number of the full panel behind it (1-5).

`summary_lines` turns the pure rows of `nettop.tui.model` into text lines for a given
size (no Textual, so tests read them as plain text); `SummaryView` draws them with the
line API and refreshes only the lines whose text changed, like the tables. Lines left
over on a tall-enough terminal hold a throughput chart of the busiest interfaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar, Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.containers import Vertical
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from nettop.tui import format as fmt
from nettop.tui import numa
from nettop.tui.model import CpuRow, IfaceSummary, LatencyRow, QdiscSummary, cpu_strip, heat_level, top_cpus

Run = tuple[str, str]  # (text, role); roles are the widget's summary--ROLE component classes
Line = tuple[Run, ...]
ROLES = ("head", "key", "first", "muted", "warm", "hot", "trend", "heat-0", "heat-1", "heat-2", "heat-3")
HEAT = "▁▂▃▄▅▆▇█"
HEAT_FULL_PCT = 50.0  # softirq % drawn as a full block: half the CPU in softirq is hot already
TOP_N = 4
MAX_TARGETS = 3
MAX_QDISCS = 3
CHART_MIN_LINES = 6  # spare lines below the figures that are worth a throughput chart
CHART_LINES = 2  # interfaces plotted there: the busiest (the table above has them all)


@dataclass(frozen=True, slots=True)
class SummaryData:
    """What the summary shows of one point, already reduced to rows."""

    ifaces: Sequence[IfaceSummary]
    idle: Sequence[tuple[str, str]]  # (name, operstate) folded into one line
    cpus: Sequence[CpuRow]
    latency: Sequence[LatencyRow]
    latency_trend: Mapping[str, Sequence[float]]  # avg RTT per target, oldest first
    qdiscs: Sequence[QdiscSummary]
    probing: bool  # a latency probe runs (targets may not have answered yet)
    findings: Sequence[tuple[str, str]] = ()  # the doctor's (severity label, title), worst first
    cpu_nodes: Mapping[int, int] = field(default_factory=dict)  # CPU -> NUMA node (big hosts' strip)


def _head(width: int, key: str, title: str, columns: str = "", title_w: int | None = None) -> Line:
    """A section heading: the key of the full panel, the title, then the column names
    (after `title_w` columns, so they sit over the rows' figures; else at the right edge)."""
    lead = f" {key} {title}"
    if title_w is not None:
        text = (lead.ljust(title_w) + columns)[:width]
    else:
        room = max(0, width - len(lead))
        text = lead + (columns[len(columns) - room:] if room < len(columns) else columns.rjust(room))
    return ((text[:len(key) + 1], "key"), (text[len(key) + 1:], "head"))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def _ms(v: float | None) -> str:
    return fmt.DASH if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}")


def _level(value: float | None, warm: float, hot: float) -> str:
    if value is None:
        return "muted"
    return "hot" if value >= hot else "warm" if value >= warm else ""


def heat_char(pct: float | None) -> str:
    if pct is None:
        return "·"
    return HEAT[min(len(HEAT) - 1, max(0, int(pct / HEAT_FULL_PCT * (len(HEAT) - 1) + 0.5)))]


def iface_lines(rows: Sequence[IfaceSummary], idle: Sequence[tuple[str, str]], width: int,
                room: int) -> list[Line]:
    """The interface section: a heading with the column names, then at most `room` - 1
    lines (the last says how many did not fit, and which interfaces are idle)."""
    name_w = max(9, min(16, max((len(r.name) + 2 for r in rows), default=9)))
    fixed = 1 + name_w + 9 + 9 + 8 + 7 + 6 + 7 + 6
    trend_w = max(0, min(16, width - fixed - 1))
    cols = (f"{'rx bit/s':>9}{'tx bit/s':>9}{'pkt/s':>8}{'drop/s':>7}  {'queue':<5}{'/s':>6}{'cpu':>6} "
            + (" trend".ljust(trend_w) if trend_w >= 5 else ""))
    out = [_head(width, "3", "interfaces", cols, title_w=1 + name_w)]
    body = room - 1
    folded = list(idle)
    if len(rows) > body:
        shown, hidden = list(rows[:max(0, body - 1)]), rows[max(0, body - 1):]
    else:
        shown, hidden = list(rows), []
        if folded and len(rows) == body:  # the idle line needs a line of its own
            shown, hidden = shown[:-1], shown[-1:]
    for r in shown:
        mark = fmt.SESSION_MARK if r.session else "●" if r.first else " "
        name = _fit(r.name, name_w - 2) + " " + mark
        line: list[Run] = [(" " + name.ljust(name_w), "first" if r.first else "")]
        if r.state not in ("up", "unknown") and r.rx_bits in (None, 0.0):
            line.append((f"{r.state:>9}", "muted"))
            line.append((" " * 9, ""))
        else:
            line.append((f"{fmt.si(r.rx_bits):>9}", "" if r.rx_bits is not None else "muted"))
            line.append((f"{fmt.si(r.tx_bits):>9}", "" if r.tx_bits is not None else "muted"))
        line.append((f"{fmt.si(r.packets_per_s):>8}", "" if r.packets_per_s is not None else "muted"))
        line.append((f"{fmt.si(r.drops_per_s):>7}", _level(r.drops_per_s, 1e-9, 1e-9)))
        line.append(("  " + (r.hot_queue or fmt.DASH).ljust(5)[:5], "" if r.hot_queue else "muted"))
        line.append((f"{fmt.si(r.hot_rate):>6}", "" if r.hot_rate is not None else "muted"))
        line.append((f"{_fit(r.hot_cpus or fmt.DASH, 5):>6} ", "" if r.hot_cpus else "muted"))
        if trend_w >= 5:
            line.append((fmt.sparkline(list(r.trend), trend_w), "trend"))
        out.append(tuple(line))
    if hidden or folded:
        counts = ", ".join(([f"+{len(hidden)} more"] if hidden else []) + ([f"{len(folded)} idle"] if folded else []))
        names = [r.name for r in hidden] + [n if s in ("up", "unknown") else f"{n}({s})" for n, s in folded]
        hint = "  (i picks, 3 shows all)"
        text = _fit(f" {counts}: " + " ".join(names), width - len(hint)) + hint
        out.append(((text, "muted"),))
    return out


def cpu_lines(rows: Sequence[CpuRow], width: int, two: bool, cpu_nodes: Mapping[int, int] | None = None) -> list[Line]:
    """The CPU section: a heading, the heat strip, and the hottest CPUs by softirq (on
    the strip's line when they fit, else on a line of their own when `two`). Above
    `numa.NODE_VIEW_ABOVE_CPUS` CPUs on two nodes or more, the strip is cut by NUMA node
    and the hottest CPUs are named with their node."""
    # unknown when no CPU has the figure (a capture without uptime), never a made-up 0
    drops = sum(r.dropped_per_s or 0.0 for r in rows) if any(r.dropped_per_s is not None for r in rows) else None
    squeeze = sum(r.squeeze_per_s or 0.0 for r in rows) if any(r.squeeze_per_s is not None for r in rows) else None
    known = [r.softirq_pct for r in rows if r.softirq_pct is not None]
    avg = sum(known) / len(known) if known else None
    cols = f"avg {fmt.pct(avg)}%  drop/s {fmt.si(drops)}  squeeze/s {fmt.si(squeeze)} "
    nodes = cpu_nodes or {}
    n_nodes = len({nodes.get(r.cpu) for r in rows}) if numa.node_view(rows) else 0
    if n_nodes > 1:  # one node (or none known): the plain strip below says as much
        every = numa.with_offline(rows, nodes)
        off = len(numa.offline_ids(every))
        title = f"CPUs softirq % {len(every) - off} on {n_nodes} nodes" + (f" {off} off" if off else "")
        out = [_head(width, "2", title, cols)]
        cut, _ = numa.strip_runs(rows, nodes, width)
        busiest = numa.busiest_runs(rows, nodes, width, " top")
        out.append(tuple(cut))
        if two and len(busiest) > 1:
            out.append(busiest)
        return out
    out = [_head(width, "2", f"CPUs softirq %  {len(rows)} CPUs", cols)]
    label = f" {rows[0].cpu if rows else 0}▕"
    cells, per = cpu_strip(rows, max(1, width - len(label) - 12))
    strip: list[Run] = [(label, "muted")]
    for pct, level in cells:
        strip.append((heat_char(pct), f"heat-{level}"))
    tail = f"▏{rows[-1].cpu if rows else 0}" + (f" ({per}/cell)" if per > 1 else "")
    strip.append((tail, "muted"))
    used = len(label) + len(cells) + len(tail)
    top: list[Run] = [(" top", "muted")]
    for r in top_cpus(rows, TOP_N):
        top += [(f" cpu{r.cpu} ", ""), (f"{fmt.pct(r.softirq_pct)}%", f"heat-{heat_level(r)}")]
    top_len = sum(len(t) for t, _ in top)
    if used + 2 + top_len <= width:
        out.append(tuple(strip) + (("  ", ""),) + tuple(top[1:]) if len(top) > 1 else tuple(strip))
    else:
        out.append(tuple(strip))
        if two and len(top) > 1:
            out.append(tuple(top))
    return out


def _room(rows: Sequence[object], room: int) -> tuple[int, bool]:
    """How many rows fit under a heading in `room` lines, and whether a "+N more" line
    follows (with two lines: one row, the count going to the heading instead)."""
    if len(rows) <= room - 1:
        return len(rows), False
    return max(1, room - 2), room >= 3


def latency_lines(data: SummaryData, width: int, room: int) -> list[Line]:
    cols = f"{'p50 ms':>8}{'p99 ms':>8}{'loss %':>8}{'replies':>9}  trend "
    target_w = max(10, width - len(cols) - 1)
    n, more_line = _room(data.latency, room)
    more = len(data.latency) - n
    title = "latency" + (f" +{more}" if more and not more_line else "")
    out = [_head(width, "4", title, cols, title_w=1 + target_w)]
    if not data.latency:
        text = "waiting for the first replies…" if data.probing else "no latency probe: run with --ping HOST"
        out.append(((" " + text, "muted"),))
        return out
    for r in data.latency[:n]:
        line: list[Run] = [(" " + _fit(r.target, target_w).ljust(target_w), "")]
        if r.error:
            line.append((" " + _fit(r.error, width - target_w - 2), "hot"))
            out.append(tuple(line))
            continue
        line += [(f"{_ms(r.p50_ms):>8}", "" if r.p50_ms is not None else "muted"),
                 (f"{_ms(r.p99_ms):>8}", "" if r.p99_ms is not None else "muted"),
                 (f"{fmt.pct(r.loss_pct):>8}", "muted" if r.loss_pct is None else _level(r.loss_pct, 1e-9, 5)),
                 (f"{f'{r.received}/{r.sent}':>9}", "muted"),
                 ("  " + fmt.sparkline(list(data.latency_trend.get(r.key, ())), 6), "trend")]
        out.append(tuple(line))
    if more and more_line:
        out.append(((f" +{more} more targets (4 shows all)", "muted"),))
    return out


def qdisc_lines(rows: Sequence[QdiscSummary], width: int, room: int) -> list[Line]:
    cols = f"{'backlog':>12}{'drops':>8}{'drop/s':>8}{'requeues':>10} "
    label_w = max(10, width - len(cols) - 1)
    n, more_line = _room(rows, room)
    more = len(rows) - n
    out = [_head(width, "5", "qdisc" + (f" +{more}" if more and not more_line else ""), cols, title_w=1 + label_w)]
    if not rows:
        out.append(((" no queueing qdisc on the shown interfaces (noqueue)", "muted"),))
        return out
    # the troubled ones first: dropping now, then holding a backlog
    rows = sorted(rows, key=lambda q: (-(q.drops_per_s or 0.0), -q.backlog_packets))
    for q in rows[:n]:
        out.append((
            (" " + _fit(f"{q.ifname} {q.kind}", label_w).ljust(label_w), ""),
            (f"{fmt.si(q.backlog_bytes, 'B') + '/' + str(q.backlog_packets) + 'p':>12}",
             _level(q.backlog_packets, 1, 100)),
            (f"{fmt.si(q.drops):>8}", ""),
            (f"{fmt.si(q.drops_per_s):>8}", _level(q.drops_per_s, 1e-9, 1e-9)),
            (f"{fmt.si(q.requeues):>10}", "muted"),
        ))
    if more and more_line:
        out.append(((f" +{more} more (5 shows all)", "muted"),))
    return out


def finding_line(findings: Sequence[tuple[str, str]], width: int) -> Line:
    """One line for the doctor: the worst finding and how many more (7 opens the panel)."""
    label, title = findings[0]
    more = f"  +{len(findings) - 1} more" if len(findings) > 1 else ""
    lead = " 7 "
    body = _fit(f"{label} {title}", max(0, width - len(lead) - len(more)))
    return ((lead, "key"), (body, "hot" if label == "crit" else "warm"), (more, "muted"))


def summary_lines(data: SummaryData, width: int, height: int) -> list[Line]:
    """The whole summary in at most `height` lines of at most `width` columns: the CPU,
    latency and qdisc sections take what they need (a few lines each), the interfaces
    the rest; what does not fit is counted on a line of its own. The doctor's worst
    finding, when there is one, comes first: it is what to act on."""
    if data.findings and height > 7:
        return [finding_line(data.findings, width)] + summary_lines(
            replace(data, findings=()), width, height - 1)
    def full(n: int, most: int) -> int:  # heading + rows + "+N more"
        return 1 + max(1, min(n, most) + (n > most))

    # every section keeps its heading and one line; then the interfaces get what they
    # need, then the CPUs' second line, the latency targets, the qdiscs
    rem = height - 6
    if_room = max(2, min(1 + len(data.ifaces) + (1 if data.idle else 0), rem))
    rem -= if_room
    cpu_room = 2 + (rem > 0)
    rem -= cpu_room - 2
    lat_room = 2 + max(0, min(full(len(data.latency), MAX_TARGETS) - 2, rem))
    rem -= lat_room - 2
    qd_room = 2 + max(0, min(full(len(data.qdiscs), MAX_QDISCS) - 2, rem))
    lines = iface_lines(data.ifaces, data.idle, width, if_room)
    lines += cpu_lines(data.cpus, width, two=cpu_room >= 3, cpu_nodes=data.cpu_nodes)
    lines += latency_lines(data, width, lat_room)
    lines += qdisc_lines(data.qdiscs, width, qd_room)
    return lines[:height]


def line_text(line: Line) -> str:
    return "".join(t for t, _ in line)


class SummaryBox(Vertical):
    """Holds the summary lines and the chart under them; tells the app when its size
    changed, since the lines are laid out for the size (a resize, the notice appearing)."""

    class Resized(Message):
        pass

    def on_resize(self) -> None:
        self.post_message(self.Resized())


class SummaryView(Widget):
    """Draws summary lines; only lines whose text or colours changed are refreshed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"summary--{r}" for r in ROLES}

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._lines: list[Line] = []
        self._strips: dict[int, Strip] = {}
        self._styles: dict[str, Style] = {}

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._on_theme)

    def _on_theme(self, _theme: object) -> None:
        self._styles.clear()
        self._strips.clear()
        self.refresh()

    def on_resize(self) -> None:
        self._strips.clear()
        self.refresh()

    def show(self, lines: list[Line]) -> None:
        old, self._lines = self._lines, lines
        if len(old) != len(lines):
            self._strips.clear()
            self.refresh()
            return
        for y, (a, b) in enumerate(zip(old, lines)):
            if a != b:
                self._strips.pop(y, None)
                self.refresh(Region(0, y, self.size.width, 1))

    def text_lines(self) -> list[str]:
        """The summary as plain text (what tests read)."""
        return [line_text(line) for line in self._lines]

    def _style(self, role: str) -> Style:
        style = self._styles.get(role)
        if style is None:
            base = self.rich_style
            style = base if not role else base + self.get_component_rich_style(f"summary--{role}", partial=True)
            self._styles[role] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self._lines):
            return Strip.blank(width, self._style(""))
        strip = self._strips.get(y)
        if strip is None:
            line = self._lines[y]
            segs = [Segment(text, self._style(role)) for text, role in line]
            fill = self._style("head") if line and line[0][1] == "key" else self._style("")
            strip = Strip(segs).crop_extend(0, width, fill)
            self._strips[y] = strip
        return strip
