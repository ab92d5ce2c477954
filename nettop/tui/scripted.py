"""A scripted source and a deterministic synthetic host, for tests and screenshots.

`ScriptedSource` has no thread and no timer: the test pushes each snapshot and the app
sees it exactly as it would see a live one (same Timeline, same Mailbox). `synthetic`
builds the snapshots of a made-up host whose counters grow by fixed, varying steps, so
every screenshot is the same on every machine: no real clock, hostname or CPU %.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Collection, Iterable, Mapping

from nettop.collectors.session_path import SessionPath
from nettop.doctor import DoctorConfig, Finding, evaluate_recent
from nettop.ebpf.sample import DropCounts, EbpfSample, IrqCounts, NapiCounts, ProbeCost
from nettop.ebpf.sample import SoftirqCounts as EbpfSoftirq
from nettop.ping.stats import summarize
from nettop.model.problems import Problem
from nettop.model.snapshot import (
    BqlState, CpuTimes, DeviceConfig, HostConfig, InterruptTable, Irq, IrqAffinity,
    LinkStats, QdiscStats, QueueConfig, QueueCounters, QueueIrqs, QueueMap, QueueStats,
    Snapshot, SoftirqCounts, SoftnetRow,
)
from nettop.model.timeline import Event, Point, Timeline
from nettop.pipeline import Mailbox, RecordingTap, Wake
from nettop.record.recorder import open_live_recording

if TYPE_CHECKING:
    from nettop.doctor.watch import Watch
    from nettop.ebpf.switch import ProbeSwitch
    from nettop.pipeline import Source
    from nettop.ping.prober import Prober

T_WALL0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
T_MONO0 = 1000.0


class ScriptedSource:
    """A source the test drives: `push` a snapshot, the app gets its point."""

    def __init__(self, mode: str = "live", is_root: bool = True,
                 cpu_nodes: Mapping[int, int] | None = None, own_cpu: float | None = 1.5,
                 interval: float = 1.0, routes: tuple[int, ...] = ()) -> None:
        self.mode = mode
        self.is_root = is_root
        self.cpu_nodes = dict(cpu_nodes or {})
        self.timeline = Timeline()
        self.own_cpu = own_cpu
        self.interval = interval
        self.paused = False
        self.started = False
        self.stopped = False
        self._mailbox = Mailbox()
        self._wake: Wake | None = None
        self.tap: RecordingTap | None = RecordingTap(open_live_recording)  # the record key works as live
        self.routes = routes  # ifindexes of the default route, as LiveSource reads them
        self.session_path: SessionPath | None = None  # a test's SSH session, as detect() finds one
        self.doctor: Watch | None = None  # a test may give it the live source's Watch
        self.probe_switch: ProbeSwitch | None = None  # the eBPF key says there are no probes
        self.prober: Prober | None = None
        # the last `show_settings`: (interfaces, queue rows drawn by interface or None)
        self.settings_shown: tuple[list[str], dict[str, set[tuple[str, int]]] | None] | None = None

    @property
    def doctor_config(self) -> DoctorConfig:
        return self.doctor.config if self.doctor is not None else DoctorConfig()

    def route_ifindexes(self) -> tuple[int, ...]:
        return self.routes

    def show_settings(self, ifnames: Iterable[str],
                      queues: Mapping[str, Collection[tuple[str, int]]] | None = None) -> None:
        """Nothing is read (the settings are what the script holds); the call is kept, so
        a test sees what the live view would have the reader read every tick."""
        self.settings_shown = (list(ifnames), None if queues is None else {n: set(q) for n, q in queues.items()})

    def session(self) -> SessionPath | None:
        return self.session_path

    captured_at: float | None = None  # not a captured tree
    capture_note: str | None = None

    def playback(self) -> None:
        return None  # a script has no recording to move through

    @property
    def superseded(self) -> int:
        return self._mailbox.superseded

    def start(self, wake: Wake) -> None:
        self.started = True
        self._wake = wake
        if self._mailbox_has_point():
            wake()

    def _mailbox_has_point(self) -> bool:
        return self.timeline.latest() is not None

    def push(self, snap: Snapshot) -> Point:
        point = self.timeline.append(snap)
        if self._mailbox.put(point) and self._wake is not None:
            self._wake()
        if self.tap is not None:
            self.tap.feed(snap, self.timeline)
        return point

    def add_event(self, event: Event) -> None:
        self.timeline.add_event(event)

    def take(self) -> Point | None:
        return self._mailbox.take()

    def stop(self) -> None:
        self.stopped = True
        if self.tap is not None:
            self.tap.stop()

    def own_cpu_percent(self) -> float | None:
        return self.own_cpu

    def findings(self) -> list[Finding]:
        if self.doctor is not None:
            return self.doctor.shown()
        return evaluate_recent(self.timeline.points(), self.doctor_config)  # as a replay judges


if TYPE_CHECKING:
    def _is_a_source(s: ScriptedSource) -> Source:
        return s  # mypy checks that the scripted source is a complete Source


# --- a synthetic host ------------------------------------------------------------------

_WAVE = (3, 5, 8, 13, 9, 6, 4, 7, 11, 10, 5, 2)


def _grow(i: int, step: int, phase: int = 0) -> int:
    """Counter value at tick i: a sum of varying steps, so rates move but never repeat randomly."""
    full, rest = divmod(i, len(_WAVE))
    base = full * sum(_WAVE)
    part = sum(_WAVE[(k + phase) % len(_WAVE)] for k in range(rest))
    return step * (base + part)


def synthetic(i: int, cpus: int = 4, queues: int = 4, interval: float = 1.0,
              problems: tuple[Problem, ...] = (), ping: tuple[str, ...] = (), ebpf: bool = False,
              veths: int = 1, idle: tuple[str, ...] = ()) -> Snapshot:
    """Tick `i` of a host with eth0 (virtio-style IRQs, mq + pfifo_fast, BQL), `veths` veth
    pair ends without IRQs but with per-queue counters (veth0, veth1, ...), loopback, and
    the `idle` links (no traffic, no queue IRQs; a name with "down" in it is down); with
    `ebpf`, the probes' counts of one interval too (scripted_ebpf)."""
    cpu_ids = tuple(range(cpus))
    irqs: dict[int, Irq] = {}
    qirqs: list[QueueIrqs] = []
    aff: dict[int, IrqAffinity] = {}
    for q in range(queues):
        for kind, base, label in (("rx", 40, "input"), ("tx", 40 + queues, "output")):
            n = base + q
            counts = tuple(_grow(i, 90 + 40 * q, q + c) if c == q % cpus else c for c in cpu_ids)
            irqs[n] = Irq(n, "PCI-MSIX-0000:00:03.0", f"{n}-edge", f"virtio2-{label}.{q}", counts, sum(counts))
            qirqs.append(QueueIrqs(kind, q, (n,)))
            aff[n] = IrqAffinity(n, (q % cpus,), (q % cpus,), None, 0)
    table = InterruptTable(cpu_ids, irqs)
    softirqs = {c: SoftirqCounts(c, _grow(i, 200 + 50 * c, c), _grow(i, 40 + 10 * c, c)) for c in cpu_ids}
    times = {}
    for c in cpu_ids:
        busy = _grow(i, 1 + c % 3, c)
        times[c] = CpuTimes(c, user=busy, nice=0, system=busy, idle=100 * i - 3 * busy,
                            iowait=0, irq=busy // 3, softirq=busy, steal=0)
    softnet = {c: SoftnetRow(c, _grow(i, 300 + c, c), _grow(i, 1) if c == cpus - 1 else 0,
                             _grow(i, 2, c) if c == 0 else 0, 0, 0, 0, True) for c in cpu_ids}
    rxb, txb = _grow(i, 1_250_000), _grow(i, 310_000, 3)
    vb = _grow(i, 4_000_000, 5)
    links = {
        "lo": LinkStats("lo", 1, _grow(i, 900), _grow(i, 900), _grow(i, 9), _grow(i, 9), 0, 0, 0, 0,
                        "unknown", 65536, 1000),
        "eth0": LinkStats("eth0", 2, rxb, txb, rxb // 1400, txb // 600, 0, 0, 0, 0, "up", 1500, 1000,
                          None, None, None, False, queues, queues, "virtio_net"),
        "veth0": LinkStats("veth0", 7, vb, vb // 3, vb // 1500, vb // 4500, 0, 0, 0, 0, "up", 1500, 1000,
                           10000, "veth", None, False, queues, queues, "veth"),
    }
    vq = tuple(QueueCounters(k, q, _grow(i, 500 * (q + 1), q), _grow(i, 700_000 * (q + 1), q))
               for k in ("rx", "tx") for q in range(queues))
    qstats = {"eth0": QueueStats("eth0", (), "none"), "veth0": QueueStats("veth0", vq, "ethtool-stats")}
    qmaps = {"eth0": QueueMap("eth0", tuple(qirqs), "driver-naming", (39,)),
             "veth0": QueueMap("veth0", (), "none")}
    for v in range(1, veths):  # more lab veths, each busy at its own pace
        name, vb_v = f"veth{v}", _grow(i, 1_000_000 * v, v)
        links[name] = LinkStats(name, 7 + v, vb_v, vb_v // 2, vb_v // 1500, vb_v // 3000, 0, 0, 0, 0, "up",
                                1500, 1000, 10000, "veth", None, False, queues, queues, "veth")
        qstats[name] = QueueStats(name, tuple(QueueCounters(k, q, _grow(i, 90 * v * (q + 1), q), _grow(
            i, 130_000 * v * (q + 1), q)) for k in ("rx", "tx") for q in range(queues)), "ethtool-stats")
        qmaps[name] = QueueMap(name, (), "none")
    for n, name in enumerate(idle):
        links[name] = LinkStats(name, 30 + n, 0, 0, 0, 0, 0, 0, 0, 0, "down" if "down" in name else "unknown",
                                1500, 32, None, "ifb" if name.startswith("ifb") else "dummy")
    qcfg = tuple(QueueConfig("rx", q, rps_cpus="0" if q else "f", rps_flow_cnt=0) for q in range(queues)) + \
        tuple(QueueConfig("tx", q, xps_cpus=format(1 << (q % cpus), "x")) for q in range(queues))
    bql = tuple(BqlState(q, 3028 + 1514 * q, 1879048192, 0, (i * 1514 * (q + 1)) % 9084) for q in range(queues))
    devices = {
        "eth0": DeviceConfig("eth0", 0, "virtio_net", "0000:00:03.0", qcfg, bql),
        "veth0": DeviceConfig("veth0", None, "veth", None, qcfg),
        **{f"veth{v}": DeviceConfig(f"veth{v}", None, "veth", None, qcfg) for v in range(1, veths)},
    }
    qdiscs = {"eth0": (QdiscStats("eth0", "mq", "0:", "root", txb, txb // 600, _grow(i, 1), 0, _grow(i, 2)),)
              + tuple(QdiscStats("eth0", "pfifo_fast", "0:", f"0:{q + 1}", txb // queues,
                                 txb // 600 // queues, 0, 0, _grow(i, 1) // queues, 1514 * q, q)
                      for q in range(queues)),
              "veth0": (QdiscStats("veth0", "noqueue", "0:", "root"),)}
    for v in range(1, veths):
        qdiscs[f"veth{v}"] = (QdiscStats(f"veth{v}", "noqueue", "0:", "root"),)
    latency = {}
    for n, target in enumerate(ping):
        # ten probes an interval; every 7th tick one is lost; RTTs wander around 0.3-2 ms
        rtts = [0.1 * ((i + k + n) % 12) + 0.3 + n for k in range(10 if i % 7 else 9)]
        latency[target] = summarize(rtts, 10, target, target)
    return Snapshot(
        t_mono=T_MONO0 + i * interval, t_wall=T_WALL0 + i * interval, host="lab-host",
        kernel="6.18.0-nettop-test", online_cpus=cpu_ids, interrupts=table, softirqs=softirqs,
        cpu_times=times, softnet=softnet, links=links, queue_maps=qmaps, queue_stats=qstats,
        qdiscs=qdiscs, devices=devices, irq_affinity=aff,
        host_config=HostConfig("pfifo_fast", irqbalance_running=False), problems=problems,
        read_cpu_s=0.002, latency=latency, ebpf=scripted_ebpf(i, cpus, queues, interval) if ebpf else None,
    )


def scripted_ebpf(i: int, cpus: int = 4, queues: int = 4, interval: float = 1.0) -> EbpfSample:
    """One interval of probe counts: eth0's rx queues polled (queue 0 hard enough to be in
    polling mode), the veth's traffic on backlog NAPI, hardirq time of eth0's IRQs,
    NET_RX/NET_TX per CPU and two drop reasons."""
    step = _WAVE[i % len(_WAVE)]
    napi = []
    for q in range(queues):
        polls = 400 * step // (q + 1)
        full = polls * 3 // 4 if q == 0 else polls // 20
        napi.append(NapiCounts("eth0", 2, 4026531840, 8193 + q, 40 + q, q % cpus, polls,
                               polls * (60 if q == 0 else 9), full, polls // 10, 64))
    napi.append(NapiCounts("", 0, 0, 0, None, cpus - 1, 90 * step, 2000 * step, 3 * step, 0, 64))
    hardirq = tuple(IrqCounts(40 + q, f"virtio2-input.{q}", q % cpus, 300 * step // (q + 1),
                              2_000_000 * step // (q + 1)) for q in range(queues))
    soft = []
    for c in range(cpus):
        for vec, scale in (("NET_RX", 3), ("NET_TX", 1)):
            runs = 250 * step * scale // (c + 1)
            wait = tuple(runs // 4 if b in (10, 11, 12, 13) else 0 for b in range(32))
            run = tuple(runs // 2 if b in (13, 14) else 0 for b in range(32))
            soft.append(EbpfSoftirq(c, vec, runs, runs, runs, runs * 9000, runs, runs * 3000, wait, run))
    drops = (DropCounts("NO_SOCKET", 3, "veth0", 7, 4026531840, "__udp4_lib_rcv+0x8a0", 40 * step),
             DropCounts("QDISC_DROP", 6, "eth0", 2, 4026531840, "__dev_queue_xmit+0x6c4", 3 * step))
    return EbpfSample(interval, interval, 1, ("napi", "hardirq", "softirq", "drops"), tuple(napi), hardirq,
                      tuple(soft), drops, (ProbeCost("napi:napi_poll", 1500 * step, 400 * step),
                                           ProbeCost("irq:softirq_entry", 900 * step, 300 * step)),
                      netns_self=4026531840)


ROOT_PROBLEMS = (
    Problem("ethtool eth0", "cannot read ethtool eth0: Operation not permitted (permission denied; run nettop as root to see it)"),
    Problem("/proc/irq/40/smp_affinity_list", "cannot read /proc/irq/40/smp_affinity_list: Permission denied"),
)
