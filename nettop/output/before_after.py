"""Did the change help? The seconds before a moment against the seconds after it.

One interval's rates are boiled down to the few figures an operator compares across a
tuning change (throughput, NIC interrupts, the hottest CPU's softirq load, drops,
time_squeeze, RTT), then averaged over a window on each side of the change. The live
view's before/after screen and `nettop report` use these same functions, so a change
reviewed in a replay or a ticket reads as it did on the screen. Pure: no kernel, no UI.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, fields
from typing import Iterable, Iterator, Sequence

from nettop.model.rates import Rates, rate_columns
from nettop.model.snapshot import Snapshot

WINDOW_S = 60.0  # default seconds on each side
KEYS = ("throughput", "irq", "softirq", "drops", "squeeze", "rtt")
LABELS = {"throughput": "throughput (rx+tx)", "irq": "NIC interrupts", "softirq": "softirq, busiest CPU",
          "drops": "drops", "squeeze": "time_squeeze", "rtt": "RTT (worst)"}


@dataclass(frozen=True, slots=True)
class Figures:
    """What one interval looked like, summed over the interfaces (aggregates and lo left
    out, so a bond and its members count once) and over the CPUs."""

    t_wall: float
    elapsed_s: float
    rx_bytes_s: float
    tx_bytes_s: float
    busiest_link: str
    max_softirq_pct: float
    softirq_cpu: int | None
    drops_s: float  # softnet + interface + root qdisc drops
    squeeze_s: float
    worst_rtt_ms: float | None
    worst_loss_pct: float | None
    irq_s: float = 0.0  # interrupts of the NIC queues' IRQs
    t_mono: float = 0.0  # the sample's monotonic time: windows that a wall clock step cannot bend


def figures(snap: Snapshot, rates: Rates) -> Figures:
    links = {n: r for n, r in rates.links.items()
             if r.rx_bytes_per_s is not None and not is_aggregate(snap, n)}
    rx = sum(r.rx_bytes_per_s or 0.0 for r in links.values())
    tx = sum(r.tx_bytes_per_s or 0.0 for r in links.values())
    busiest = max(links, key=lambda n: (links[n].rx_bytes_per_s or 0) + (links[n].tx_bytes_per_s or 0), default="")
    # a few fields of every CPU, as columns: the live view makes this digest every tick,
    # and at 256+ CPUs making each CPU's CpuRates to read three of them cost more than
    # the rest of the tick's rates (model/rates.py, RatesTable.columns)
    _, (cpu, pct, dropped, squeezed) = rate_columns(rates.cpus, "cpu", "softirq_pct", "softnet_dropped_per_s",
                                                    "time_squeeze_per_s")
    soft = [(p or 0.0, c) for p, c in zip(pct, cpu) if p is not None]
    top = max(soft, default=(0.0, None))
    drops = sum(d or 0.0 for d in dropped)
    drops += sum((r.rx_dropped_per_s or 0.0) + (r.tx_dropped_per_s or 0.0) for r in links.values())
    drops += sum(q.drops_per_s or 0.0 for qs in rates.qdiscs.values() for q in qs if q.parent == "root")
    squeeze = sum(q or 0.0 for q in squeezed)
    rtts = [s.rtt_max_ms for s in snap.latency.values() if s.rtt_max_ms is not None]
    losses = [s.loss_pct for s in snap.latency.values() if s.loss_pct is not None]
    nic_irqs = {i for name, m in snap.queue_maps.items() if name in links for q in m.queues for i in q.irqs}
    # the IRQs' rates as columns too: made into 516 IrqRates only for this at 1,024 CPUs
    irqs, (irq_per_s,) = rate_columns(rates.irqs, "per_s")
    irq = sum(p or 0.0 for i, p in zip(irqs, irq_per_s) if i in nic_irqs)
    return Figures(snap.t_wall, rates.elapsed_s, rx, tx, busiest, top[0], top[1], drops, squeeze,
                   max(rtts, default=None), max(losses, default=None), irq, snap.t_mono)


_FLOATS = tuple(f.name for f in fields(Figures) if f.name not in ("busiest_link", "softirq_cpu",
                                                                     "worst_rtt_ms", "worst_loss_pct"))
_OPTIONAL = ("worst_rtt_ms", "worst_loss_pct")


class FiguresRing:
    """The last `size` intervals' Figures as preallocated columns, oldest first.

    The live view keeps an hour of these for the before/after screen. As 3,600 Figures
    objects (each with its own floats) they were ~1.4 MB of small long-lived objects
    made one a tick among each tick's garbage, so the heap's arenas could not be given
    back and RSS grew through the whole first hour. As columns (8 bytes a value, the
    interface name as an index into the names seen) the ring is its full size from the
    first sample and costs the same after an hour as after a minute. Figures are made
    again only when read (the b key, a report). Not thread-safe: the Timeline's lock
    guards it."""

    __slots__ = ("size", "_cols", "_opt", "_has", "_cpu", "_link", "_names", "_index", "_next", "_len")

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._cols = {name: array("d", bytes(8 * self.size)) for name in _FLOATS}
        self._opt = {name: array("d", bytes(8 * self.size)) for name in _OPTIONAL}
        self._has = {name: bytearray(self.size) for name in _OPTIONAL}
        self._cpu = array("q", bytes(8 * self.size))  # softirq_cpu, -1 for None
        self._link = array("l", bytes(array("l").itemsize * self.size))  # into _names
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._next = 0  # the slot the next append writes
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def append(self, f: Figures) -> None:
        at = self._next
        for name, col in self._cols.items():
            col[at] = getattr(f, name)
        for name, col in self._opt.items():
            v = getattr(f, name)
            self._has[name][at] = v is not None
            col[at] = math.nan if v is None else v
        self._cpu[at] = -1 if f.softirq_cpu is None else f.softirq_cpu
        link = self._index.get(f.busiest_link)
        if link is None:
            if len(self._names) >= 4 * self.size:  # names seen outgrow the ring: keep those held
                self._renumber()
            link = self._index[f.busiest_link] = len(self._names)
            self._names.append(f.busiest_link)
        self._link[at] = link
        self._next = (at + 1) % self.size
        self._len = min(self._len + 1, self.size)

    def _renumber(self) -> None:
        """Forget interface names no kept interval holds (a host whose containers make and
        destroy interfaces all day would otherwise grow the table by name, not by ring)."""
        held = sorted({self._link[i] for i in self._slots()})
        names = [self._names[i] for i in held]
        new = {old: k for k, old in enumerate(held)}
        for i in self._slots():
            self._link[i] = new[self._link[i]]
        self._names = names
        self._index = {n: k for k, n in enumerate(names)}

    def _slots(self) -> list[int]:
        start = (self._next - self._len) % self.size
        return [(start + k) % self.size for k in range(self._len)]

    def __iter__(self) -> Iterator[Figures]:
        for i in self._slots():
            yield self._at(i)

    def _at(self, i: int) -> Figures:
        kw: dict[str, object] = {name: col[i] for name, col in self._cols.items()}
        for name, col in self._opt.items():
            kw[name] = col[i] if self._has[name][i] else None
        cpu = self._cpu[i]
        kw["softirq_cpu"] = None if cpu < 0 else cpu
        kw["busiest_link"] = self._names[self._link[i]]
        return Figures(**kw)  # type: ignore[arg-type]

    def nbytes(self) -> int:
        """What the columns hold (the names table aside), for tests and the benchmark."""
        arrays: list[array] = [*self._cols.values(), *self._opt.values(), self._cpu, self._link]
        return sum(a.buffer_info()[1] * a.itemsize for a in arrays) + sum(len(b) for b in self._has.values())


def is_aggregate(snap: Snapshot, name: str) -> bool:
    link = snap.links.get(name)
    return link is not None and (link.is_aggregate or name == "lo")


def window(series: Iterable[Figures], lo: float, hi: float) -> list[Figures]:
    """The intervals that ended in [lo, hi)."""
    return [f for f in series if lo <= f.t_wall < hi]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(rows: Sequence[Figures]) -> dict[str, float | None]:
    """Averages over `rows` (RTT: the worst); None where no interval had the figure."""
    rtts = [f.worst_rtt_ms for f in rows if f.worst_rtt_ms is not None]
    return {
        "throughput": _mean([f.rx_bytes_s + f.tx_bytes_s for f in rows]),
        "irq": _mean([f.irq_s for f in rows]),
        "softirq": _mean([f.max_softirq_pct for f in rows]),
        "drops": _mean([f.drops_s for f in rows]),
        "squeeze": _mean([f.squeeze_s for f in rows]),
        "rtt": max(rtts) if rtts else None,
    }


@dataclass(frozen=True, slots=True)
class Comparison:
    t_wall: float
    window_s: float
    before: dict[str, float | None]
    after: dict[str, float | None]
    n_before: int  # intervals averaged on each side
    n_after: int

    def change_pct(self, key: str) -> float | None:
        """After relative to before in %, None when either side is unknown or before is 0."""
        b, a = self.before.get(key), self.after.get(key)
        if b is None or a is None or b == 0:
            return None
        return 100.0 * (a - b) / b


def compare(series: Sequence[Figures], t_wall: float, window_s: float = WINDOW_S) -> Comparison:
    """Before: intervals ending in the `window_s` before `t_wall`; after: those ending
    after it, starting one interval later (the interval that holds the change is a mix
    of both and belongs to neither)."""
    before = window(series, t_wall - window_s, t_wall)
    later = [f for f in series if f.t_wall >= t_wall]
    after = window(later[1:], t_wall, t_wall + window_s + (later[0].elapsed_s if later else 0.0))
    return Comparison(t_wall, window_s, summary(before), summary(after), len(before), len(after))


def format_value(key: str, v: float | None) -> str:
    if v is None:
        return "–"
    if key == "throughput":
        bits = v * 8
        for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
            if bits >= div:
                return f"{bits / div:.2f} {unit}"
        return f"{bits:.0f} bit/s"
    if key == "softirq":
        return f"{v:.1f} %"
    if key == "rtt":
        return f"{v:.2f} ms"
    return f"{v:.1f}/s"


__all__ = ["Comparison", "Figures", "FiguresRing", "KEYS", "LABELS", "WINDOW_S", "compare", "figures", "format_value",
           "is_aggregate", "summary", "window"]
