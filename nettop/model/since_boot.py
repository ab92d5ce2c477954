"""One capture by itself: its totals averaged over the host's uptime.

A captured tree read twice gives the same counters twice, so every rate between the two
reads is 0, which says nothing true. What one capture does know is how much each counter
grew since boot (every kernel counter starts at 0 then) and how long that took
(/proc/uptime). `boot_snapshot` builds the snapshot the host had at boot, every counter
0 and the clock `uptime_s` earlier, so the ordinary pure rate functions (and the doctor's
windows) give since-boot averages with no second code path.

Caveats the documents state (docs/captures.md): a 32-bit counter (softnet_stat, some
qdisc and IRQ counts) that wrapped since boot makes its average too low; an interface or
qdisc created after boot, or a driver reloaded, makes its average too low as well (its
counters started later than the clock); and an average says nothing about bursts.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from nettop.model.snapshot import (
    CpuTimes, InterruptTable, Irq, LinkStats, QdiscStats, QueueCounters, QueueStats,
    Snapshot, SoftirqCounts, SoftnetRow,
)

_LINK_COUNTERS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
                  "rx_errors", "tx_errors", "rx_dropped", "tx_dropped")


def boot_snapshot(cur: Snapshot) -> Snapshot | None:
    """`cur`'s host at boot: counters 0 (unknown ones stay None), `uptime_s` earlier.
    None when the capture has no uptime to average over."""
    up = cur.uptime_s
    if up is None or not up > 0:
        return None
    return dataclasses.replace(
        cur,
        t_mono=cur.t_mono - up,
        t_wall=cur.t_wall - up,
        interrupts=_interrupts(cur.interrupts),
        softirqs={c: SoftirqCounts(c, 0, 0) for c in cur.softirqs},
        cpu_times={c: CpuTimes(c, 0, 0, 0, 0, 0, 0, 0, 0) for c in cur.cpu_times},
        softnet={c: _softnet(r) for c, r in cur.softnet.items()},
        links={n: _link(link) for n, link in cur.links.items()},
        queue_stats={n: _queues(q) for n, q in cur.queue_stats.items()},
        qdiscs={n: tuple(_qdisc(q) for q in qs) for n, qs in cur.qdiscs.items()},
        problems=(),
        read_cpu_s=0.0,
        latency={},
        ebpf=None,
        uptime_s=0.0,
    )


def _interrupts(t: InterruptTable) -> InterruptTable:
    irqs: Mapping[int, Irq] = {
        n: dataclasses.replace(
            i, counts=None if i.counts is None else (0,) * len(i.counts),
            total=None if i.total is None else 0)
        for n, i in t.irqs.items()}
    return InterruptTable(t.cpus, irqs, {k: (0,) * len(v) for k, v in t.other.items()})


def _softnet(r: SoftnetRow) -> SoftnetRow:
    return dataclasses.replace(r, processed=0, dropped=0, time_squeeze=0, received_rps=0,
                               flow_limit_count=0)


def _link(link: LinkStats) -> LinkStats:
    zeroed: dict[str, Any] = {f: None if getattr(link, f) is None else 0 for f in _LINK_COUNTERS}
    return dataclasses.replace(link, **zeroed)


def _queues(q: QueueStats) -> QueueStats:
    return dataclasses.replace(q, queues=tuple(
        QueueCounters(c.kind, c.index, None if c.packets is None else 0,
                      None if c.bytes is None else 0) for c in q.queues))


def _qdisc(q: QdiscStats) -> QdiscStats:
    return dataclasses.replace(q, bytes=0, packets=0, drops=0, overlimits=0, requeues=0)
