"""Two snapshots one second apart, built from per-second rates, for the doctor's unit tests.

Each test states a host as the rates and settings a rule reads; `points()` gives the
two timeline points the engine evaluates. One second apart, a count difference equals
its rate, so a threshold edge in a test reads as the number in thresholds.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nettop.ebpf.sample import DropCounts, EbpfSample
from nettop.model.snapshot import (
    CpuTimes, DeviceConfig, HostConfig, HostTuning, InterruptTable, Irq, IrqAffinity, LinkStats,
    NicTuning, QdiscStats, QueueConfig, QueueCounters, QueueIrqs, QueueMap, QueueStats, Snapshot,
    SoftirqCounts, SoftnetRow,
)
from nettop.model.timeline import Point
from nettop.ping.stats import LatencyStats


@dataclass
class FakeHost:
    cpus: tuple[int, ...] = (0, 1, 2, 3)
    # CPU -> (softirq %, hardirq %, idle %); the rest of 100 is user time
    load: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    dropped: dict[int, float] = field(default_factory=dict)
    squeeze: dict[int, float] = field(default_factory=dict)
    received_rps: dict[int, float] = field(default_factory=dict)
    net_rx: dict[int, float] = field(default_factory=dict)
    # IRQ -> {CPU: interrupts/s}
    irqs: dict[int, dict[int, float]] = field(default_factory=dict)
    # NIC name -> queue index -> IRQ (combined queues)
    queue_irqs: dict[str, dict[int, int]] = field(default_factory=dict)
    affinity: dict[int, tuple[int, ...]] = field(default_factory=dict)
    links: dict[str, dict[str, Any]] = field(default_factory=lambda: {"eth0": {}})
    link_pps: dict[str, tuple[float, float]] = field(default_factory=dict)  # rx, tx packets/s
    rx_queue_pps: dict[str, dict[int, float]] = field(default_factory=dict)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    tx_queues: dict[str, list[str | None]] = field(default_factory=dict)  # xps masks
    rps: dict[str, list[str | None]] = field(default_factory=dict)
    sysctls: dict[str, str] = field(default_factory=dict)
    irqbalance: bool = False
    rps_sock_flow_entries: int | None = 0
    qdiscs: dict[str, list[tuple]] = field(default_factory=dict)  # kind, backlog pkts[, bytes]
    # target -> (idle rtt ms, loaded p50 ms)
    rtt: dict[str, tuple[float, float]] = field(default_factory=dict)
    missed: dict[str, float] = field(default_factory=dict)
    features: dict[str, dict[str, bool]] = field(default_factory=dict)
    local_cpus: dict[str, tuple[int, ...]] = field(default_factory=dict)
    cpu_nodes: dict[int, int] = field(default_factory=dict)
    governors: dict[str, int] = field(default_factory=dict)
    idle_states: tuple[tuple[str, int], ...] = ()
    conntrack: tuple[int, int] | None = None
    drops: dict[str, float] = field(default_factory=dict)

    def snapshot(self, t: float) -> Snapshot:
        k = t  # seconds since the first snapshot: counts = rate * k
        cpu_times = {}
        for c in self.cpus:
            soft, hard, idle = self.load.get(c, (0.0, 0.0, 100.0))
            user = 100.0 - soft - hard - idle
            cpu_times[c] = CpuTimes(c, user=int(1000 + user * k), nice=0, system=0, idle=int(1000 + idle * k),
                                    iowait=0, irq=int(1000 + hard * k), softirq=int(1000 + soft * k), steal=0)
        softnet = {c: SoftnetRow(c, processed=int(10_000 + 1000 * k), dropped=int(self.dropped.get(c, 0) * k),
                                 time_squeeze=int(self.squeeze.get(c, 0) * k),
                                 received_rps=int(self.received_rps.get(c, 0) * k), flow_limit_count=0)
                   for c in self.cpus}
        softirqs = {c: SoftirqCounts(c, net_rx=int(self.net_rx.get(c, 0) * k), net_tx=0) for c in self.cpus}
        irqs = {n: Irq(n, "PCI-MSIX", f"{n}-edge", f"q{n}",
                       tuple(int(per.get(c, 0) * k) for c in self.cpus))
                for n, per in self.irqs.items()}
        links = {}
        for i, (name, extra) in enumerate(sorted(self.links.items())):
            rx, tx = self.link_pps.get(name, (0.0, 0.0))
            links[name] = LinkStats(name, i + 2, rx_bytes=int(rx * 1000 * k), tx_bytes=int(tx * 1000 * k),
                                    rx_packets=int(rx * k), tx_packets=int(tx * k), rx_errors=0, tx_errors=0,
                                    rx_dropped=0, tx_dropped=0, operstate="up",
                                    **{"txqueuelen": 1000, "num_rx_queues": 4, "num_tx_queues": 4, **extra})
        qmaps = {name: QueueMap(name, tuple(QueueIrqs("combined", q, (irq,)) for q, irq in sorted(m.items())),
                                "driver-naming") for name, m in self.queue_irqs.items()}
        qstats = {name: QueueStats(name, tuple(QueueCounters("rx", q, int(v * k), int(v * 1000 * k))
                                               for q, v in sorted(per.items())), "ethtool-stats")
                  for name, per in self.rx_queue_pps.items()}
        devices = {}
        for name in self.links:
            queues = tuple(QueueConfig("rx", i, rps_cpus=m) for i, m in enumerate(self.rps.get(name, ())))
            queues += tuple(QueueConfig("tx", i, xps_cpus=m) for i, m in enumerate(self.tx_queues.get(name, ())))
            devices[name] = DeviceConfig(name, queues=queues, **self.devices.get(name, {}))
        aff = {n: IrqAffinity(n, cpus, cpus, None) for n, cpus in self.affinity.items()}
        qd = {name: tuple(QdiscStats(name, row[0], f"{i + 1}:", "root" if i == 0 else "1:", backlog_packets=row[1],
                                     backlog_bytes=row[2] if len(row) > 2 else row[1] * 1500)
                          for i, row in enumerate(rows)) for name, rows in self.qdiscs.items()}
        latency = {}
        for target, (idle, loaded) in self.rtt.items():
            p50 = idle if k == 0 else loaded
            latency[target] = LatencyStats(target, target, 10, 10, 0.0, p50, p50, p50, 0.0, p50, p50, p50)
        nics = {name: NicTuning(name, features=self.features.get(name),
                                rx_missed=int(self.missed.get(name, 0) * k) if name in self.missed else None,
                                local_cpus=self.local_cpus.get(name))
                for name in self.links}
        tuning = HostTuning(governors=dict(self.governors), idle_states=self.idle_states,
                            conntrack_count=self.conntrack[0] if self.conntrack else None,
                            conntrack_max=self.conntrack[1] if self.conntrack else None,
                            cpu_nodes=dict(self.cpu_nodes), nics=nics)
        ebpf = None
        if self.drops and k > 0:
            ebpf = EbpfSample(elapsed_s=1.0, window_s=1.0,
                              drops=tuple(DropCounts(r, 0, "eth0", 2, 0, "f", int(v)) for r, v in self.drops.items()))
        return Snapshot(
            t_mono=100.0 + k, t_wall=1_700_000_000.0 + k, host="fake", kernel="6.18", online_cpus=self.cpus,
            interrupts=InterruptTable(self.cpus, irqs), softirqs=softirqs, cpu_times=cpu_times, softnet=softnet,
            links=links, queue_maps=qmaps, queue_stats=qstats, qdiscs=qd, devices=devices, irq_affinity=aff,
            host_config=HostConfig(irqbalance_running=self.irqbalance,
                                   rps_sock_flow_entries=self.rps_sock_flow_entries, sysctls=dict(self.sysctls)),
            latency=latency, ebpf=ebpf, tuning=tuning)

    def points(self) -> list[Point]:
        return [Point(self.snapshot(0.0), None), Point(self.snapshot(1.0), None)]


def with_(host: FakeHost, **changes: Any) -> FakeHost:
    return replace(host, **changes)
