"""A snapshot as Prometheus families: the kernel's counters as they are, no rates.

Every name starts with `nettop_`; counters end in `_total`; time is in seconds and sizes
in bytes. node_exporter already exports /proc/stat modes, softnet_stat and the
interface counters under its own names (`node_cpu_seconds_total`,
`node_softnet_*`, `node_network_*`); nettop exports its own copies under `nettop_`
names so that one scrape holds every figure of its screen, each labelled the way nettop
shows it (queue, IRQ, driver) — docs/fleet.md maps one to the other.

Cardinality is bounded by the host's shape, never by traffic: per CPU (softirqs,
softnet, CPU time), per queue (IRQ count, packets, bytes, BQL), per qdisc, per
interface, per ping target, per active finding. The only per-CPU x per-IRQ series,
`nettop_queue_irq_cpu_interrupts_total`, are opt-in (`--per-cpu-irqs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from nettop.ebpf.sample import EbpfSample, device_label
from nettop.model.snapshot import Snapshot
from nettop.ping.histogram import BUCKETS_S, HistogramView
from nettop.serve.exposition import Family

USER_HZ = 100  # /proc/stat ticks per second on every architecture Linux exports it for


@dataclass(frozen=True)
class Options:
    per_cpu_irqs: bool = False  # nettop_queue_irq_cpu_interrupts_total: CPUs x queue IRQs series


@dataclass(frozen=True)
class FindingGauge:
    id: str
    rule: str
    subject: str
    severity: int
    severity_label: str


def _f(name: str, kind: str, text: str) -> Family:
    return Family(name, kind, text)


def snapshot_families(snap: Snapshot, opts: Options = Options()) -> list[Family]:
    """The host's counters and gauges of one snapshot."""
    fams: list[Family] = []
    drivers = {n: (snap.devices[n].driver if n in snap.devices else None) or (l.driver or "")
               for n, l in snap.links.items()}

    qi = _f("nettop_queue_interrupts_total", "counter",
            "Interrupts of a queue's IRQ on all CPUs (/proc/interrupts), by interface, queue, IRQ and driver.")
    qic = _f("nettop_queue_irq_cpu_interrupts_total", "counter",
             "Interrupts of a queue's IRQ per CPU (opt-in: --per-cpu-irqs).")
    for ifname, qmap in sorted(snap.queue_maps.items()):
        for q in qmap.queues:
            for irq in q.irqs:
                entry = snap.interrupts.irqs.get(irq)
                if entry is None or entry.counts is None:
                    continue
                labels = {"iface": ifname, "queue": f"{q.kind}-{q.index}", "irq": str(irq),
                          "driver": drivers.get(ifname, "")}
                qi.add(labels, entry.total if entry.total is not None else sum(entry.counts))
                if opts.per_cpu_irqs:
                    for cpu, n in zip(snap.interrupts.cpus, entry.counts):
                        qic.add({**labels, "cpu": str(cpu)}, n)
    fams += [qi, qic]

    qp = _f("nettop_queue_packets_total", "counter", "Packets of one rx or tx queue (netdev qstats or the driver's ethtool -S).")
    qb = _f("nettop_queue_bytes_total", "counter", "Bytes of one rx or tx queue (netdev qstats or the driver's ethtool -S).")
    for ifname, qs in sorted(snap.queue_stats.items()):
        for c in qs.queues:
            labels = {"iface": ifname, "queue": f"{c.kind}-{c.index}", "source": qs.source}
            if c.packets is not None:
                qp.add(labels, c.packets)
            if c.bytes is not None:
                qb.add(labels, c.bytes)
    fams += [qp, qb]

    nrx = _f("nettop_softirq_net_rx_total", "counter", "NET_RX softirqs run on a CPU (/proc/softirqs).")
    ntx = _f("nettop_softirq_net_tx_total", "counter", "NET_TX softirqs run on a CPU (/proc/softirqs).")
    for cpu, s in sorted(snap.softirqs.items()):
        nrx.add({"cpu": str(cpu)}, s.net_rx)
        ntx.add({"cpu": str(cpu)}, s.net_tx)
    fams += [nrx, ntx]

    sn = {k: _f(f"nettop_softnet_{k}_total", "counter", text) for k, text in (
        ("processed", "Packets a CPU's NET_RX processing took from its backlog or NAPI (softnet_stat)."),
        ("dropped", "Packets dropped because a CPU's input backlog was full (netdev_max_backlog)."),
        ("time_squeeze", "NET_RX runs that stopped with work left (budget or time limit hit)."),
        ("received_rps", "Times a CPU was woken by another to process RPS-steered packets."),
        ("flow_limit", "Packets dropped by the flow limit (net.core.flow_limit_cpu_bitmap)."))}
    backlog = _f("nettop_softnet_backlog_packets", "gauge", "Packets waiting in a CPU's input and process queues.")
    for cpu, row in sorted(snap.softnet.items()):
        lab = {"cpu": str(cpu)}
        sn["processed"].add(lab, row.processed)
        sn["dropped"].add(lab, row.dropped)
        sn["time_squeeze"].add(lab, row.time_squeeze)
        sn["received_rps"].add(lab, row.received_rps)
        sn["flow_limit"].add(lab, row.flow_limit_count)
        if row.backlog is not None:
            backlog.add(lab, row.backlog)
    fams += [*sn.values(), backlog]

    si = _f("nettop_cpu_softirq_seconds_total", "counter", "Time a CPU spent in softirqs (/proc/stat).")
    hi = _f("nettop_cpu_hardirq_seconds_total", "counter", "Time a CPU spent in hard interrupt handlers (/proc/stat).")
    for cpu, t in sorted(snap.cpu_times.items()):
        si.add({"cpu": str(cpu)}, t.softirq / USER_HZ)
        hi.add({"cpu": str(cpu)}, t.irq / USER_HZ)
    fams += [si, hi]

    qd = {k: _f(f"nettop_qdisc_{k}_total", "counter", f"{what} of a qdisc (tc -s qdisc).") for k, what in (
        ("bytes", "Bytes sent"), ("packets", "Packets sent"), ("drops", "Packets dropped"),
        ("requeues", "Packets requeued"), ("overlimits", "Overlimit events"))}
    qbb = _f("nettop_qdisc_backlog_bytes", "gauge", "Bytes queued in a qdisc now.")
    qbp = _f("nettop_qdisc_backlog_packets", "gauge", "Packets queued in a qdisc now.")
    for ifname, qdiscs in sorted(snap.qdiscs.items()):
        for qdisc in qdiscs:
            lab = {"iface": ifname, "kind": qdisc.kind, "handle": qdisc.handle, "parent": qdisc.parent}
            qd["bytes"].add(lab, qdisc.bytes)
            qd["packets"].add(lab, qdisc.packets)
            qd["drops"].add(lab, qdisc.drops)
            qd["requeues"].add(lab, qdisc.requeues)
            qd["overlimits"].add(lab, qdisc.overlimits)
            qbb.add(lab, qdisc.backlog_bytes)
            qbp.add(lab, qdisc.backlog_packets)
    fams += [*qd.values(), qbb, qbp]

    bl = _f("nettop_bql_limit_bytes", "gauge", "Byte Queue Limits: the bytes a tx queue may have in flight now.")
    bi = _f("nettop_bql_inflight_bytes", "gauge", "Byte Queue Limits: bytes handed to the driver and not yet completed.")
    for ifname, dev in sorted(snap.devices.items()):
        for b in dev.bql:
            lab = {"iface": ifname, "queue": f"tx-{b.queue}"}
            bl.add(lab, b.limit)
            bi.add(lab, b.inflight)
    fams += [bl, bi]

    link = {k: _f(f"nettop_iface_{k}_total", "counter", text) for k, text in (
        ("receive_bytes", "Bytes received by an interface."), ("transmit_bytes", "Bytes sent by an interface."),
        ("receive_packets", "Packets received by an interface."), ("transmit_packets", "Packets sent by an interface."),
        ("receive_drops", "Received packets an interface dropped."), ("transmit_drops", "Packets to send an interface dropped."),
        ("receive_errors", "Receive errors of an interface."), ("transmit_errors", "Transmit errors of an interface."))}
    for ifname, l in sorted(snap.links.items()):
        lab = {"iface": ifname, "driver": drivers.get(ifname, "")}
        for key, value in (("receive_bytes", l.rx_bytes), ("transmit_bytes", l.tx_bytes),
                           ("receive_packets", l.rx_packets), ("transmit_packets", l.tx_packets),
                           ("receive_drops", l.rx_dropped), ("transmit_drops", l.tx_dropped),
                           ("receive_errors", l.rx_errors), ("transmit_errors", l.tx_errors)):
            if value is not None:  # a counter a captured tree lacks is left out, not 0
                link[key].add(lab, value)
    fams += list(link.values())
    return fams


def ping_families(histograms: Mapping[str, HistogramView]) -> list[Family]:
    """The prober's lifetime RTT histogram and probe counts per target."""
    rtt = _f("nettop_ping_rtt_seconds", "histogram", "Round-trip time of nettop's latency probes.")
    sent = _f("nettop_ping_probes_total", "counter", "Probes whose fate is decided (answered, lost or late).")
    lost = _f("nettop_ping_lost_total", "counter", "Probes not answered within the timeout.")
    for target, h in sorted(histograms.items()):
        lab = {"target": target}
        for le, n in zip(BUCKETS_S, h.buckets):
            rtt.add({**lab, "le": repr(le)}, n, "_bucket")
        rtt.add({**lab, "le": "+Inf"}, h.count, "_bucket")
        rtt.add(lab, h.sum_s, "_sum")
        rtt.add(lab, h.count, "_count")
        sent.add(lab, h.sent)
        lost.add(lab, max(0, h.sent - h.count))
    return [rtt, sent, lost]


def finding_families(findings: Iterable[FindingGauge]) -> list[Family]:
    """One series per active finding (value: its severity, 1 info .. 3 crit); it vanishes
    when the finding resolves, like Prometheus' own ALERTS series."""
    fam = _f("nettop_doctor_finding", "gauge", "An active doctor finding; value 1 info, 2 warn, 3 crit (docs/doctor.md).")
    count = _f("nettop_doctor_findings", "gauge", "Active doctor findings by severity.")
    per: dict[str, int] = {"info": 0, "warn": 0, "crit": 0}
    for f in findings:
        fam.add({"id": f.id, "rule": f.rule, "subject": f.subject, "severity": f.severity_label}, f.severity)
        per[f.severity_label] = per.get(f.severity_label, 0) + 1
    for sev, n in per.items():
        count.add({"severity": sev}, n)
    return [fam, count]


@dataclass
class EbpfTotals:
    """The eBPF probes report counts per interval; Prometheus wants counters that only
    grow, so serve adds each interval's counts here. Keys are bounded by the host's
    NAPI instances, CPUs, IRQs and the kernel's drop reasons."""

    napi_polls: dict[tuple[str, str], int] = field(default_factory=dict)
    napi_work: dict[tuple[str, str], int] = field(default_factory=dict)
    napi_full: dict[tuple[str, str], int] = field(default_factory=dict)
    hardirq_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    softirq_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    softirq_wait_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    drops: dict[tuple[str, str], int] = field(default_factory=dict)
    seen: bool = False

    def add(self, s: EbpfSample) -> None:
        self.seen = True
        for n in s.napi:
            key = (device_label(n.ifname, n.netns, s.netns_self) or "backlog", str(n.cpu))
            self.napi_polls[key] = self.napi_polls.get(key, 0) + n.polls
            self.napi_work[key] = self.napi_work.get(key, 0) + n.work
            self.napi_full[key] = self.napi_full.get(key, 0) + n.full
        for h in s.hardirq:
            key = (str(h.irq), str(h.cpu))
            self.hardirq_ns[key] = self.hardirq_ns.get(key, 0) + h.time_ns
        for q in s.softirq:
            key = (q.vec, str(q.cpu))
            self.softirq_ns[key] = self.softirq_ns.get(key, 0) + q.run_ns
            self.softirq_wait_ns[key] = self.softirq_wait_ns.get(key, 0) + q.wait_ns
        for d in s.drops:
            key = (d.reason, device_label(d.ifname, d.netns, s.netns_self))
            self.drops[key] = self.drops.get(key, 0) + d.count

    def families(self) -> list[Family]:
        if not self.seen:
            return []
        out = []
        for name, data, labels, text, scale in (
            ("nettop_ebpf_napi_polls_total", self.napi_polls, ("iface", "cpu"), "NAPI polls (napi:napi_poll).", 1),
            ("nettop_ebpf_napi_packets_total", self.napi_work, ("iface", "cpu"), "Packets handled by NAPI polls.", 1),
            ("nettop_ebpf_napi_budget_exhausted_total", self.napi_full, ("iface", "cpu"),
             "NAPI polls that used their whole budget.", 1),
            ("nettop_ebpf_hardirq_seconds_total", self.hardirq_ns, ("irq", "cpu"), "Time in an IRQ's handler.", 1e-9),
            ("nettop_ebpf_softirq_seconds_total", self.softirq_ns, ("vec", "cpu"), "Time NET_RX/NET_TX softirqs ran.", 1e-9),
            ("nettop_ebpf_softirq_wait_seconds_total", self.softirq_wait_ns, ("vec", "cpu"),
             "Time from raising a NET_RX/NET_TX softirq to its run (measured runs).", 1e-9),
            ("nettop_ebpf_drops_total", self.drops, ("reason", "iface"), "Packets freed as dropped (skb:kfree_skb).", 1),
        ):
            fam = _f(name, "counter", text)
            for key, v in sorted(data.items()):
                fam.add(dict(zip(labels, key)), v * scale if scale != 1 else v)
            out.append(fam)
        return out
