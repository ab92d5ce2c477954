"""One read of the whole host into a Snapshot.

`HostReader` owns what lives across ticks: the netlink sockets, the ethtool string
tables, the set of IRQs that serve NIC queues (so a 4096-IRQ host only has its network
IRQs' per-CPU counts parsed), the irqbalance check's cache, and facts that do not
change while a device exists (driver, bus, NUMA node). Every source is read through its
own collector module; a source that fails becomes a Problem and the rest goes on.
"""

from __future__ import annotations

import operator
import os
import platform
import re
import time
from typing import Callable, Iterable, TypeVar

from nettop.collectors import (
    consistency,
    cpus,
    cpustat,
    device_info,
    host_config,
    interfaces,
    interrupts,
    irq_affinity,
    irq_sysfs,
    nic_settings,
    qdiscs,
    queue_config,
    queue_counters,
    queue_irqs,
    softirqs,
    softnet,
)
from nettop.collectors.host_tuning import TuningReader
from nettop.collectors.nic_rotation import NicRead, NicSettingsRotation
from nettop.collectors.settings_rotation import ROTATION_FILES_PER_S, ROTATION_S, SettingsRotation
from nettop.collectors.unchanged import LastAnswer
from nettop.ebpf import EbpfProbes
from nettop.ping import Prober
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import (BqlState, CpuTimes, DeviceConfig, InterruptTable, LinkStats, QueueConfig, QueueMap,
                                   Snapshot, SoftirqCounts, SoftnetRow)
from nettop.kernel.held_files import HeldFiles
from nettop.kernel.sysroot import LIVE, SysRoot

T = TypeVar("T")

# IRQ names that belong to network queues even before the queue map knows them.
_NET_IRQ_NAME = re.compile(
    r"(TxRx|-rx-|-tx-|rx-\d|tx-\d|mlx\d_comp|virtio\d+-(input|output)|ena-io|fp-\d|eth|ens|enp|eno|-txrx-)",
    re.IGNORECASE,
)


class HostReader:
    """Reads snapshots of one host (live or a captured tree); not thread-safe."""

    def __init__(self, root: SysRoot = LIVE, ifnames: Iterable[str] | None = None,
                 prober: Prober | None = None, follow_irqs: Iterable[int] = (),
                 probes: EbpfProbes | None = None, on_screen: Iterable[str] | None = None,
                 settings_period_s: float = ROTATION_S,
                 clock: Callable[[], float] = time.monotonic,
                 settings_files_per_s: float = ROTATION_FILES_PER_S) -> None:
        self.root = root
        self.clock = clock  # monotonic; a benchmark steps its own to stand for ticks at an interval
        self.probes = probes
        # IRQs followed besides the NICs' (counts and affinity), e.g. one a user watches
        self.follow_irqs = frozenset(follow_irqs)
        self.prober = prober
        self.only = set(ifnames) if ifnames else None
        # interfaces whose queue settings are read every tick (the rest in rotation,
        # settings_rotation.py); the consumer may change it between ticks. By default
        # the interfaces asked for by name, none when all are read.
        self.on_screen: frozenset[str] = frozenset(on_screen if on_screen is not None else ifnames or ())
        # of those, the queue rows drawn ((kind as in the queue map, index) by interface):
        # only they and their IRQs are read every tick, the rest of the interface in
        # rotation; None: every queue of an interface on screen (record, serve)
        self.screen_queues: dict[str, frozenset[tuple[str, int]]] | None = None
        self._settings = SettingsRotation(root, settings_period_s, settings_files_per_s)
        # coalescing, rings and channels (ethtool, each request takes RTNL): the same policy
        self._nic_settings = NicSettingsRotation(settings_period_s)
        # netdev genetlink's queue and NAPI dumps, asked when the queues or vectors change
        self._netdev_answers = queue_irqs.NetdevAnswers(min(settings_period_s, queue_irqs.NETDEV_REFRESH_S))
        # where each interface's device sits in sysfs, resolved once per (name, ifindex)
        self._devices = queue_irqs.DeviceLinks()
        # link speeds, read when a link's state changes (live; interfaces.LinkSpeeds)
        self._speeds = interfaces.LinkSpeeds(root, min(settings_period_s, interfaces.SPEED_REFRESH_S))
        self.settings_files = 0  # settings files the last tick read (a benchmark's figure)
        # asked at the start of every tick for (interfaces, IRQs) nettop has changed since
        # the last: the pipeline's watch on the tuning journal (nettop/pipeline/notices.py)
        self.settings_notices: Callable[[], tuple[Iterable[str], Iterable[int]]] | None = None
        self._net_irqs: frozenset[int] = frozenset()
        self._mapped: frozenset[int] = frozenset()  # the IRQs of the queue maps in _mapped_of
        self._mapped_of: tuple[QueueMap, ...] = ()
        self._name_is_net: dict[tuple[int, str], bool] = {}
        self._interrupts = interrupts.InterruptReader()
        self._irq_sysfs = irq_sysfs.SysfsIrqReader()
        self.irq_source = interrupts.SOURCE
        self._static: dict[tuple[str, int], device_info.DeviceInfo] = {}
        self._irqbalance = host_config.IrqbalanceCache()
        # the one-value files every tick reads (sysctls, conntrack fill, uptime, online
        # CPUs), held open on the live kernel and read again from offset 0
        self._files = HeldFiles(root)
        # the per-CPU files' last texts and rows: a file that did not move is not parsed again
        self._last_stat: LastAnswer[CpuTimes] = LastAnswer()
        self._last_softirqs: LastAnswer[SoftirqCounts] = LastAnswer()
        self._last_softnet: LastAnswer[SoftnetRow] = LastAnswer()
        self._managed = irq_affinity.ManagedCache(root)
        self._nl = None
        self._rtnl = None
        self._ethtool = None
        self._ethtool_monitor = None  # says which interfaces' ethtool settings changed (live)
        self._listings = queue_config.KeptListings()  # queue listings kept across ticks
        self.host = self._read_host()
        self.kernel = self._read_kernel()
        if root.live:
            self._open_netlink()
        self._queue_counters = queue_counters.QueueCounterReader(self._nl, self._ethtool)
        self._tuning = TuningReader.live(root)  # the doctor's inputs
        self._tuning.files = self._files

    # --- lifecycle ---------------------------------------------------------------------

    def _open_netlink(self) -> None:
        """Long-lived sockets; any that cannot be opened leaves its source to sysfs."""
        from nettop.kernel.ethtool import Ethtool
        from nettop.kernel.ethtool_nl import EthtoolMonitor
        from nettop.kernel.netdev_genl import NetdevNetlink, NetdevUnsupported
        from nettop.kernel.rtnl import Rtnl

        for attr, factory in (("_rtnl", Rtnl), ("_ethtool", Ethtool), ("_nl", NetdevNetlink),
                              ("_ethtool_monitor", EthtoolMonitor)):
            try:
                setattr(self, attr, factory())
            except (NetdevUnsupported, OSError):
                setattr(self, attr, None)

    def close(self) -> None:
        for h in (self._nl, self._rtnl, self._ethtool, self._ethtool_monitor):
            if h is not None:
                try:
                    h.close()
                except OSError:
                    pass
        self._nl = self._rtnl = self._ethtool = self._ethtool_monitor = None
        self._tuning.close()
        self._irq_sysfs.close()
        self._settings.close()
        self._files.close()

    def __enter__(self) -> HostReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settings_changed(self, ifnames: Iterable[str] = (), irqs: Iterable[int] = ()) -> None:
        """Re-read these interfaces' queue and ethtool settings and these IRQs' affinity on
        the next tick, on screen or not: nettop has just changed them. Any thread may call it."""
        ifnames, irqs = list(ifnames), list(irqs)
        self._settings.notice(ifnames, irqs)
        self._nic_settings.notice(ifnames)
        self._speeds.notice(ifnames)
        if ifnames or irqs:
            self._netdev_answers.notice()

    # --- one read ----------------------------------------------------------------------

    def read(self) -> Snapshot:
        t_cpu = time.thread_time()
        t_mono = self.clock()
        t_wall = time.time()
        problems: list[Problem] = []

        def take(result: tuple[T, list[Problem]]) -> T:
            value, probs = result
            problems.extend(probs)
            return value

        root = self.root
        self._files.now = t_mono  # an absent one-value file is asked for again after a while
        if self.settings_notices is not None:
            self.settings_changed(*self.settings_notices())
        probes = self.probes  # once: the TUI's probe switch may swap it from its own thread
        online = take(cpus.read_online_cpus(root, self._files))
        # the interfaces whose ethtool settings (channels among them) changed since the
        # last tick, as the kernel's monitor tells; None: all may have (it dropped some)
        watched, ethtool_changed = self._ethtool_changes()
        listings = queue_config.QueueListings()  # this tick's, for every reader that lists queues
        if watched or not root.live:
            # kept from tick to tick while each directory's stat says the same and the
            # monitor names no channels change (a live kernel without one: listed every tick)
            listings.kept = self._listings
            if ethtool_changed is None:
                self._listings.forget()
            self._listings.dirty = ethtool_changed or set()
        missed: dict[str, int] = {}  # ring overflows from the link dump (live), for the tuning read
        link_map = take(interfaces.read_links(root, self._rtnl, listings, missed, self._speeds, t_mono))
        index_names = {link.ifindex: name for name, link in link_map.items()}
        self._listings.keep_only(link_map)  # interfaces gone: their listings too
        if self.only is not None:
            link_map = {k: v for k, v in link_map.items() if k in self.only}
        names = sorted(link_map)
        live_keys = {(n, link_map[n].ifindex) for n in names}
        if self._static.keys() - live_keys:  # interfaces gone or re-created: forget them
            self._static = {k: v for k, v in self._static.items() if k in live_keys}

        table = take(self._read_irqs(root, online, False))
        qmaps = take(queue_irqs.map_all(root, names, table, self._nl, listings,
                                        {n: link_map[n].ifindex for n in names if link_map[n].ifindex},
                                        self._netdev_answers, t_mono, self._devices))
        maps = tuple(qmaps.values())
        if len(maps) != len(self._mapped_of) or not all(map(operator.is_, maps, self._mapped_of)):
            # the maps are memoized (queue_irqs._map_from): the same objects while unchanged
            self._mapped = frozenset(i for m in maps for q in m.queues for i in q.irqs).union(
                *(m.other_irqs for m in maps))
            self._mapped_of = maps
        mapped = self._mapped
        new = mapped - self._net_irqs
        self._net_irqs = mapped
        if any(i in table.irqs and table.irqs[i].counts is None for i in new):
            # a device appeared this tick: parse again with its IRQs' counts
            table = take(self._read_irqs(root, online, True))
        # the snapshot holds the IRQs it counts (the NICs' and those followed), not every
        # IRQ of the host: 16,384 names tick after tick cost the recorder, the timeline
        # and replay more than all the counts, and nothing shows them
        counted = (self._irq_sysfs.counted if self.irq_source == irq_sysfs.SOURCE
                   else {i: x for i, x in table.irqs.items() if x.counts is not None})
        table = InterruptTable(table.cpus, counted, table.other)

        damaged: list[str] = []  # per-CPU files whose collector reported a skipped line

        def per_cpu(source: str, result: tuple[T, list[Problem]]) -> T:
            if result[1]:
                damaged.append(source)
            return take(result)

        sirq = per_cpu("/proc/softirqs", softirqs.read_softirqs(root, self._last_softirqs))
        times = per_cpu("/proc/stat", cpustat.read_stat(root, self._last_stat))
        snet = per_cpu("/proc/net/softnet_stat", softnet.read_softnet(root, online or None, self._last_softnet))
        problems.extend(consistency.check_cpu_sets(online, table.cpus, sirq, times, snet, damaged))

        nics = [n for n in names if n != "lo"]
        nic_index = {n: link_map[n].ifindex for n in nics}  # name -> ifindex, read by the three below
        qstats = take(self._queue_counters.read(nic_index, t_mono))
        if not root.live:
            qstats = {**qstats, **queue_counters.saved_ethtool_stats(root, nics)}
        screen, rows = self.on_screen, self.screen_queues  # once: the consumer may swap them
        screen_irqs = set(self.follow_irqs)
        sysfs_rows: dict[str, frozenset[tuple[str, int]]] | None = None
        if rows is None:
            for n, m in qmaps.items():
                if n in screen:
                    screen_irqs.update(i for q in m.queues for i in q.irqs)
                    screen_irqs.update(m.other_irqs)
        else:
            sysfs_rows = {n: _sysfs_queues(r) for n, r in rows.items() if n in screen}
            for n, r in rows.items():
                drawn = qmaps.get(n)
                if drawn is not None and n in screen:
                    screen_irqs.update(i for q in drawn.queues if (q.kind, q.index) in r for i in q.irqs)
        irq_names = queue_irqs.names_of(table)  # a plain dict where the reader has one: C lookups
        settings = self._settings.read(
            t_mono, nic_index, screen.__contains__, screen_irqs,
            mapped | self.follow_irqs if self.follow_irqs else mapped,
            lambda i: self._managed.get(i, irq_names[i].name if i in irq_names else None), listings,
            sysfs_rows)
        problems.extend(settings.problems)
        self.settings_files = settings.files
        eth: dict[str, NicRead] = {}
        if self._ethtool is not None:
            ethtool = self._ethtool
            eth = self._nic_settings.read(t_mono, nic_index, screen.__contains__,
                                          lambda n: nic_settings.read_nic_settings(ethtool, n),
                                          self._tuning.features if root.live else None,
                                          (set(nics) if ethtool_changed is None else ethtool_changed)
                                          if watched else None)
        devices = {n: self._device_config(link_map[n], settings.queues[n], settings.bql[n], eth.get(n), problems)
                   for n in nics}
        if root.live:
            qd = take(qdiscs.read_qdiscs(root, self._rtnl, {i: n for i, n in index_names.items() if n in link_map}))
        else:  # a captured host's saved `tc -s qdisc show` (its ifindexes may be unknown)
            qd = qdiscs.qdiscs_from_saved_tc(root, set(link_map))
        aff = dict(settings.affinity)
        hc = take(host_config.read_host_config(root, self._irqbalance, self._files))
        uptime = take(read_uptime(root, self._files))
        # offloads with the NIC settings (in rotation off screen) where those are asked
        tuning = take(self._tuning.read(names, {n: r.features for n, r in eth.items()} if root.live else None,
                                        missed))

        return Snapshot(
            t_mono=t_mono,
            t_wall=t_wall,
            host=self.host,
            kernel=self.kernel,
            online_cpus=tuple(online),
            interrupts=table,
            softirqs=sirq,
            cpu_times=times,
            softnet=snet,
            links=link_map,
            queue_maps=qmaps,
            queue_stats=qstats,
            qdiscs=qd,
            devices=devices,
            irq_affinity=aff,
            host_config=hc,
            problems=_dedupe(problems),
            read_cpu_s=time.thread_time() - t_cpu,
            latency=self.prober.take() if self.prober is not None else {},
            ebpf=probes.take() if probes is not None and probes.running else None,
            tuning=tuning,
            uptime_s=uptime,
            irq_source=self.irq_source,
        )

    # --- helpers -----------------------------------------------------------------------

    def _ethtool_changes(self) -> tuple[bool, set[str] | None]:
        """(whether a monitor watches, the interfaces whose ethtool settings the kernel
        says changed since the last tick, None for all when it dropped notifications).
        A monitor that fails is closed: this tick takes all as changed, the next ones
        are read as without a monitor."""
        monitor = self._ethtool_monitor
        if monitor is None:
            return False, set()
        try:
            return True, monitor.changed()
        except OSError:
            self._ethtool_monitor = None
            monitor.close()
            return True, None

    def _read_irqs(self, root: SysRoot, online: tuple[int, ...],
                   full: bool) -> tuple[InterruptTable, list[Problem]]:
        """The followed IRQs' counts from /sys/kernel/irq, else from /proc/interrupts."""
        table = self._irq_sysfs.read(root, online, self._want_irq, full)
        if table is not None:
            self.irq_source = irq_sysfs.SOURCE
            return table, []
        self.irq_source = interrupts.SOURCE
        table, problems = self._interrupts.read(root, self._want_irq, full)
        why = self._irq_sysfs.fallback_reason
        # a damaged file is a problem; absent (old kernels, captures) or cut at PAGE_SIZE
        # (the kernel's own limit on huge hosts) is only the source, named in the snapshot
        if why is not None and "per_cpu_count" in why and "cut short" not in why:
            problems = [*problems, Problem(root.join("sys/kernel/irq"), f"{why}: per-IRQ counts read from "
                                           f"{root.join('proc/interrupts')} instead")]
        return table, problems

    def _want_irq(self, irq: int, name: str) -> bool:
        if irq in self._net_irqs or irq in self.follow_irqs:
            return True
        key = (irq, name)
        hit = self._name_is_net.get(key)
        if hit is None:
            if len(self._name_is_net) > 65536:
                self._name_is_net.clear()
            hit = self._name_is_net[key] = bool(_NET_IRQ_NAME.search(name))
        return hit

    def _device_config(self, link: LinkStats, qc: tuple[QueueConfig, ...], bq: tuple[BqlState, ...],
                       eth: NicRead | None, problems: list[Problem]) -> DeviceConfig:
        name = link.name
        key = (name, link.ifindex)
        info = self._static.get(key)
        if info is None:
            info, probs = device_info.read_device_info(self.root, name)
            problems.extend(probs)
            self._static[key] = info
        coalesce = rings = channels = None
        read_at = None
        driver = info.driver or link.driver
        if eth is not None:  # asked this tick or kept from an earlier one (nic_rotation.py)
            coalesce, rings, channels, read_at = eth.coalesce, eth.rings, eth.channels, eth.read_at
            problems.extend(eth.problems)
        elif not self.root.live:  # a sosreport's or `nettop capture`'s saved ethtool output
            from nettop.kernel import sos
            coalesce, rings, channels, _ = sos.nic_settings(self.root.path, name)
            driver = driver or sos.nic_driver(self.root.path, name)[0]
        return DeviceConfig(
            ifname=name,
            numa_node=info.numa_node,
            driver=driver,
            bus_info=info.bus_info,
            queues=qc,
            bql=bq,
            coalesce=coalesce,
            rings=rings,
            channels=channels,
            read_at=read_at,
        )

    def _read_host(self) -> str:
        if self.root.live:
            return platform.node()
        try:
            return self.root.read_line("proc/sys/kernel/hostname")
        except OSError:
            return os.path.basename(os.path.normpath(self.root.path))

    def _read_kernel(self) -> str:
        try:
            return self.root.read_line("proc/sys/kernel/osrelease")
        except OSError:
            return platform.release() if self.root.live else "unknown"


def _sysfs_queues(rows: frozenset[tuple[str, int]]) -> frozenset[tuple[str, int]]:
    """The sysfs queues (`rx-N`, `tx-N`) behind queue rows: a combined row is both."""
    if all(k != "combined" for k, _ in rows):
        return rows
    return frozenset((k, i) for kind, i in rows for k in (("rx", "tx") if kind == "combined" else (kind,)))


UPTIME = "proc/uptime"


def read_uptime(root: SysRoot, files: HeldFiles | None = None) -> tuple[float | None, list[Problem]]:
    """Seconds since boot (first field of /proc/uptime): what a captured tree's totals
    accumulated over, and the clock between two captures of one host."""
    try:
        text = (files if files is not None else root).read_line(UPTIME)
    except OSError as exc:
        if not root.live:  # a sosreport: no plugin copies /proc/uptime, its host plugin keeps `uptime`
            from nettop.kernel import sos

            value, rel = sos.uptime(root.path)
            if value is not None:
                return value, [Problem(root.join(UPTIME), (
                    f"{root.join(UPTIME)} is not in the capture: uptime {value / 3600:.1f} h taken from "
                    f"{rel}, to the minute"))]
        return None, [from_oserror("/" + UPTIME, exc)]
    try:
        value = float(text.split()[0])
        if not (value >= 0 and value < 1e10):  # also refuses nan and inf
            raise ValueError(f"{value} is not a number of seconds")
    except (ValueError, IndexError) as exc:
        return None, [malformed("/" + UPTIME, f"{text[:40]!r} ({exc})")]
    return value, []


def _dedupe(problems: list[Problem]) -> tuple[Problem, ...]:
    seen: dict[str, Problem] = {}
    for p in problems:
        seen.setdefault(p.message, p)
    return tuple(seen.values())
