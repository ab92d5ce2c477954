"""One NIC's own resources: rx ring, RSS spread, queue count, offloads, XPS."""

from __future__ import annotations

from typing import Iterator

from nettop.doctor import thresholds as T
from nettop.doctor.finding import Finding, Severity
from nettop.doctor.rules.common import (
    INTEL, MLX, RH, SCALING, Context, cpus_text, keep, local_cpus, mask_cpus, nics, pct, queue_irqs, rate,
    rx_queue_count,
)
from nettop.model.snapshot import QueueConfig, QueueIrqs, QueueMap


def rx_ring(ctx: Context) -> Iterator[Finding]:
    """6. The driver's missed / no-buffer / fifo counters rise: the rx ring is too small."""
    w, snap = ctx.window, ctx.snap
    for name in nics(snap):
        missed = w.missed_per_s(name)
        if missed is None or missed < T.MISSED_PER_S:
            continue
        dev = snap.devices.get(name)
        rings = dev.rings if dev else None
        cur, top = (rings.get("rx"), rings.get("rx-max")) if rings else (None, None)
        fix: tuple[str, ...] = ()
        command = None
        if cur is not None and top and cur < top:
            fix = (f"nettop set rings {name} rx={top}",)
        elif cur is not None and top:
            command = "the rx ring is at its maximum: add queues (channels) or RPS to drain it faster"
        yield Finding(
            "rx-ring", name, Severity.CRIT,
            f"{name} misses {rate(missed)} frames for want of rx buffers (ring {cur if cur is not None else '?'}"
            f" of max {top if top is not None else '?'})",
            "the NIC had nowhere to put arriving frames: they are lost before the kernel sees them",
            (f"rx_missed + rx_fifo + rx_over: {rate(missed)}",
             f"rx ring {cur if cur is not None else '?'}, maximum {top if top is not None else '?'}"),
            {"missed_per_s": missed, "rx_ring": float(cur or 0), "rx_ring_max": float(top or 0)},
            w.span, fix, command, f"{INTEL} (rx ring size, rx_missed_errors); {RH} (ethtool -G)")


def rss_imbalance(ctx: Context) -> Iterator[Finding]:
    """7. One rx queue carries most packets: RSS put the traffic (often one flow) on one queue."""
    w, snap = ctx.window, ctx.snap
    for name in nics(snap):
        per_q = w.queue_pps(name, "rx")
        if not per_q:  # no per-queue counters: judge by the queue IRQs' rates
            queues, irqs = _rx_queue_irqs(name, snap.queue_maps.get(name))
            got = w.irq_peaks(irqs)
            span = w.elapsed or 1.0
            if len(got) == len(queues):  # one IRQ a queue (4 x 128 queues: no generator per queue)
                rates = [(0 + (peak or (0, 0))[0]) / span for peak in got]  # 0 +: as sum() of one
                per_q = dict(zip([q.index for q in queues], rates))  # (per_q was empty)
            else:
                peaks = iter(got)
                for q in queues:
                    per_q[q.index] = sum((next(peaks) or (0, 0))[0] for _ in q.irqs) / span
        if len(per_q) < 2:
            continue
        total = sum(per_q.values())
        if total < T.BUSY_PPS:
            continue
        top = max(per_q, key=per_q.__getitem__)
        share = per_q[top] / total
        if share < T.RSS_SHARE:
            continue
        fix: tuple[str, ...] = ()
        if not snap.host_config.rps_sock_flow_entries:
            fix = (f"nettop set rfs {name} 32768",)
        yield Finding(
            "rss-imbalance", name, Severity.INFO,
            f"rx-{top} carries {pct(share)} of {name}'s received packets ({len(per_q)} queues)",
            "RSS hashes each flow to one queue: a single heavy flow stays on one queue and one CPU; RPS cannot "
            "split a single flow either. RFS moves it to the CPU of the consuming application; ntuple rules "
            "can pin flows to queues",
            (f"rx-{top}: {rate(per_q[top])} of {rate(total)}",
             "per queue: " + ", ".join(f"rx-{q} {rate(v)}" for q, v in sorted(per_q.items())[:8])),
            {"share": share, "queue": float(top), "rx_pps": total}, w.span, fix,
            f"ethtool -N {name} flow-type tcp4 dst-port PORT action QUEUE   (ntuple steering)",
            f"{SCALING} (RSS, RPS, RFS, accelerated RFS); {RH}")


def few_rx_queues(ctx: Context) -> Iterator[Finding]:
    """8. Fewer rx queues than CPUs on the node, and NET_RX concentrated on those few."""
    w, snap = ctx.window, ctx.snap
    net_rx = w.net_rx()
    loads = w.cpu_loads()
    total_rx = sum(net_rx.values())
    if total_rx <= 0:
        return
    by_rx: list[int] | None = None
    for name in nics(snap):
        link = w.link(name)
        if link is None or link[0] < T.BUSY_PPS:
            continue
        nq = rx_queue_count(snap, name)
        node = local_cpus(snap, name)
        if nq < 1 or nq >= len(node):
            continue
        if by_rx is None:  # the same order for every NIC: sorted once
            by_rx = sorted(net_rx, key=net_rx.__getitem__, reverse=True)
        busiest = by_rx[:nq]
        share = sum(net_rx[c] for c in busiest) / total_rx
        top = busiest[0]
        soft = (loads.get(top) or (0.0, 0.0, 0.0))[0]
        if share < T.NET_RX_SHARE or soft < T.CPU_LOADED_PCT:
            continue
        dev = snap.devices.get(name)
        rps_on = any(mask_cpus(q.rps_cpus) for q in dev.queues if q.kind == "rx") if dev else False
        if rps_on:
            continue
        ch = dev.channels if dev else None
        fix: str
        if ch and ch.get("combined-max", 0) > ch.get("combined", 0):
            fix = f"nettop set channels {name} combined={min(ch['combined-max'], len(node))}"
        elif ch and ch.get("rx-max", 0) > ch.get("rx", 0):
            fix = f"nettop set channels {name} rx={min(ch['rx-max'], len(node))}"
        else:
            fix = f"nettop set rps {name} all {cpus_text(node)}"
        yield Finding(
            "few-rx-queues", name, Severity.WARN,
            f"{name} has {nq} rx queue(s) for {len(node)} CPUs on its node, and {pct(share)} of NET_RX runs on "
            f"CPU(s) {cpus_text(sorted(busiest))}",
            "receive work cannot spread beyond one CPU per queue; the node's other CPUs stay idle while these saturate",
            (f"rx queues {nq}, node CPUs {len(node)}", f"CPU {top}: softirq {soft:.0f} %",
             f"NET_RX on the busiest {nq}: {pct(share)}"),
            {"rx_queues": float(nq), "node_cpus": float(len(node)), "net_rx_share": share, "softirq_pct": soft},
            w.span, (fix,), None, f"{SCALING} (RSS queues, RPS); {MLX}")


def offloads_off(ctx: Context) -> Iterator[Finding]:
    """11. GRO, GSO or TSO is off on a busy NIC."""
    w, snap = ctx.window, ctx.snap
    t = snap.tuning
    if t is None:
        return
    for name in nics(snap):
        nic = t.nics.get(name)
        link = w.link(name)
        if nic is None or not nic.features or link is None or link[0] + link[1] < T.BUSY_PPS:
            continue
        off = sorted(k for k in ("gro", "gso", "tso") if nic.features.get(k) is False)
        if not off:
            continue
        yield Finding(
            "offloads-off", name, Severity.WARN,
            f"{', '.join(k.upper() for k in off)} off on {name} at {rate(link[0] + link[1])} packets",
            "without GRO/GSO/TSO the stack handles every 1500-byte packet on its own: several times the CPU per byte",
            (f"{name}: rx {rate(link[0])}, tx {rate(link[1])} packets", f"off: {', '.join(off)}"),
            {"pps": link[0] + link[1], **{f"{k}_off": 1.0 for k in off}}, w.span,
            (f"nettop set features {name} " + " ".join(f"{k}=on" for k in off),), None,
            f"{RH} (offload features: GRO, GSO, TSO)")


def no_xps(ctx: Context) -> Iterator[Finding]:
    """13. A multi-queue tx NIC sending traffic has no XPS."""
    w, snap = ctx.window, ctx.snap
    for name in nics(snap):
        dev = snap.devices.get(name)
        link = w.link(name)
        if dev is None or link is None or link[1] < T.XPS_TX_PPS:
            continue
        txq = _unsteered_tx_queues(name, dev.queues)
        if txq is None:
            continue
        cpus = local_cpus(snap, name)
        fix = tuple(f"nettop set xps {name} {q.index} {cpus_text([cpus[i % len(cpus)]])}" for i, q in enumerate(txq))
        yield Finding(
            "no-xps", name, Severity.INFO,
            f"{name} sends {rate(link[1])} packets over {len(txq)} tx queues without XPS",
            "without XPS the tx queue follows a hash, so CPUs contend for the same queue lock and completions "
            "land on other CPUs' caches",
            (f"{len(txq)} tx queues, xps_cpus all 0", f"tx {rate(link[1])} packets"),
            {"tx_queues": float(len(txq)), "tx_pps": link[1]}, w.span, fix, None, f"{SCALING} (XPS)")


def _rx_queue_irqs(name: str, qm: QueueMap | None) -> tuple[list[QueueIrqs], list[int]]:
    """(a NIC's rx and combined queues with IRQs, their IRQs in order). Kept per NIC while
    its QueueMap is the same object (the reader hands the same one until its queues
    change): two walks over 4 x 128 queues a tick. The map is held, so its id cannot be
    reused while it is kept."""
    got = _RX_QUEUES.get(name)
    if got is None or got[0] is not qm:
        queues = tuple(q for q in qm.queues if q.kind in ("rx", "combined") and q.irqs) if qm else ()
        got = (qm, queues, tuple(i for q in queues for i in q.irqs))
        keep(_RX_QUEUES, name, got, _UNSTEERED_KEEP)
    return list(got[1]), list(got[2])


# NIC name -> (its QueueMap, its rx and combined queues with IRQs, their IRQs)
_RX_QUEUES: dict[str, tuple[QueueMap | None, tuple[QueueIrqs, ...], tuple[int, ...]]] = {}


def _unsteered_tx_queues(name: str, queues: tuple[QueueConfig, ...]) -> list[QueueConfig] | None:
    """A NIC's tx queues when there are several, each with XPS built in and none set;
    else None. Kept per NIC while its queue settings are the same tuple (the reader
    hands the same one until a setting changes): 4 x 256 queues walked twice a tick
    were ~0.1 ms. The tuple is held, so its id cannot be reused while it is kept."""
    got = _UNSTEERED.get(name)
    if got is not None and got[0] is queues:
        return list(got[1]) if got[1] is not None else None
    txq = [q for q in queues if q.kind == "tx"]
    # not a single queue, XPS built in on each, set on none
    found = (tuple(txq) if len(txq) >= 2 and all(q.xps_cpus is not None for q in txq)
             and not any(mask_cpus(q.xps_cpus) for q in txq) else None)
    keep(_UNSTEERED, name, (queues, found), _UNSTEERED_KEEP)
    return txq if found is not None else None


# NIC name -> (its queue settings, its tx queues without XPS or None)
_UNSTEERED: dict[str, tuple[tuple[QueueConfig, ...], tuple[QueueConfig, ...] | None]] = {}
_UNSTEERED_KEEP = 64


RULES = (rx_ring, rss_imbalance, few_rx_queues, offloads_off, no_xps)
