"""The one sample type: raw kernel counters and configuration at one instant.

Collectors fill these from procfs, sysfs, netlink and ethtool; they hold counters, never
rates. Rates are pure functions of two snapshots (see `rates.py`), and a recording
stores exactly these objects, so live, record and replay compute the same figures.

All classes are frozen; mappings inside them are never mutated after construction.
CPU-indexed data is keyed by the kernel's CPU id, never by line position, because
offline CPUs leave gaps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from nettop.ebpf.sample import EbpfSample
from nettop.ping.stats import LatencyStats
from nettop.model.problems import Problem
from nettop.model.rows import quick_init

EMPTY: Mapping = {}


# --- /proc/interrupts ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Irq:
    """One numbered line of /proc/interrupts."""

    irq: int
    chip: str  # "PCI-MSIX-0000:00:03.0", "IO-APIC", "PCI-MSI-edge" on old kernels
    hwirq: str  # "2-edge"; "" on old kernels that print no hwirq column
    name: str  # the action names, e.g. "virtio2-input.0" or "mlx5_comp3@pci:0000:81:00.0"
    # Per-CPU counts aligned with InterruptTable.cpus; None when the parser was asked to
    # skip this line's counts (a 256-CPU host has millions of numbers nobody looks at).
    # A tuple, or a CountRow (model/counts.py: a row of the sysfs reader's matrix that
    # reads as that tuple and equals it).
    counts: Sequence[int] | None = None
    total: int | None = None


@dataclass(frozen=True, slots=True)
class InterruptTable:
    cpus: tuple[int, ...]  # CPU ids from the header (online CPUs only)
    # A HostReader snapshot holds the IRQs it counts (the NICs' and those followed); a
    # collector's own table also names the uncounted ones (counts None) for the queue map.
    irqs: Mapping[int, Irq] = field(default_factory=dict)
    # Named rows (NMI, LOC, RES, ...): per-CPU counts aligned with `cpus`.
    other: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


# --- NIC queues and their IRQs -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueIrqs:
    """One hardware queue of a NIC and the IRQ(s) that serve it."""

    kind: str  # "rx", "tx" or "combined" (one IRQ serves both rx-N and tx-N)
    index: int
    irqs: tuple[int, ...] = ()
    napi_id: int | None = None


@dataclass(frozen=True, slots=True)
class QueueMap:
    """How an interface's queues map to IRQs, and how nettop found out."""

    ifname: str
    queues: tuple[QueueIrqs, ...]
    source: str  # "netdev-netlink", "driver-naming", "none"
    # IRQs of the device (msi_irqs) that serve no queue: config, async events, ...
    other_irqs: tuple[int, ...] = ()


# --- /proc/softirqs, /proc/stat, /proc/net/softnet_stat ------------------------------


@dataclass(frozen=True, slots=True)
class SoftirqCounts:
    cpu: int
    net_rx: int
    net_tx: int


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """Per-CPU time from /proc/stat, in USER_HZ ticks."""

    cpu: int
    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int
    guest: int = 0
    guest_nice: int = 0

    @property
    def total(self) -> int:
        # guest time is already counted in user/nice
        return (
            self.user + self.nice + self.system + self.idle + self.iowait
            + self.irq + self.softirq + self.steal
        )


@dataclass(frozen=True, slots=True)
class SoftnetRow:
    """One CPU's line of /proc/net/softnet_stat."""

    cpu: int
    processed: int
    dropped: int
    time_squeeze: int
    received_rps: int
    flow_limit_count: int
    backlog: int | None = None  # input + process queue length, newer kernels only
    cpu_from_column: bool = False  # the kernel printed the CPU id (else inferred)


# --- interfaces ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Counters and state of one interface (netlink stats64, or sysfs from a root).

    A counter is None when the source does not have it (a captured tree without the
    interface's `statistics/` nor a /proc/net/dev line for it): unknown, never 0.
    `ifindex` is 0 for an interface known only from a captured /proc/net/dev.
    """

    name: str
    ifindex: int
    rx_bytes: int | None
    tx_bytes: int | None
    rx_packets: int | None
    tx_packets: int | None
    rx_errors: int | None
    tx_errors: int | None
    rx_dropped: int | None
    tx_dropped: int | None
    operstate: str = "unknown"
    mtu: int = 0
    txqueuelen: int = 0
    speed_mbps: int | None = None  # None when unknown (virtual devices, link down)
    kind: str | None = None  # rtnetlink kind: "veth", "bond", "bridge", ...; None = physical
    master: str | None = None  # bond/bridge this interface is enslaved to
    is_aggregate: bool = False  # a bond/bridge/team: its counters repeat its members'
    num_rx_queues: int = 0
    num_tx_queues: int = 0
    driver: str | None = None


@dataclass(frozen=True, slots=True)
class QueueCounters:
    """Per-queue packets/bytes of one queue (None where the source has no such field)."""

    kind: str  # "rx" or "tx"
    index: int
    packets: int | None = None
    bytes: int | None = None


@dataclass(frozen=True, slots=True)
class QueueStats:
    ifname: str
    queues: tuple[QueueCounters, ...]
    source: str  # "netdev-qstats", "ethtool-stats", "none"


@dataclass(frozen=True, slots=True)
class QdiscStats:
    ifname: str
    kind: str  # "mq", "pfifo_fast", "fq_codel", "noqueue", ...
    handle: str  # "8001:" (tc's notation)
    parent: str  # "root", "ingress" or the parent class "8001:3"
    bytes: int = 0
    packets: int = 0
    drops: int = 0
    overlimits: int = 0
    requeues: int = 0
    backlog_bytes: int = 0
    backlog_packets: int = 0

    @property
    def is_root(self) -> bool:
        return self.parent == "root"


@dataclass(frozen=True, slots=True)
class BqlState:
    """Byte queue limits of one tx queue (/sys/class/net/IF/queues/tx-N/byte_queue_limits)."""

    queue: int
    limit: int
    limit_max: int
    limit_min: int
    inflight: int
    read_at: float | None = None  # t_mono of the tick that read it (settings rotation); None: not said


# --- configuration read-back ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IrqAffinity:
    irq: int
    affinity: tuple[int, ...] | None  # smp_affinity_list (what was requested)
    effective: tuple[int, ...] | None  # effective_affinity_list (what the kernel uses)
    hint: tuple[int, ...] | None  # affinity_hint (what the driver suggests); None if empty
    node: int | None = None  # /proc/irq/N/node
    # True: the kernel refuses user affinity (managed or per-CPU IRQ); None: not known
    managed: bool | None = None
    read_at: float | None = None  # t_mono of the tick that read it (settings rotation); None: not said


@dataclass(frozen=True, slots=True)
class QueueConfig:
    kind: str  # "rx" or "tx"
    index: int
    rps_cpus: str | None = None  # hex mask exactly as the kernel prints it
    rps_flow_cnt: int | None = None
    xps_cpus: str | None = None
    xps_rxqs: str | None = None
    read_at: float | None = None  # t_mono of the tick that read it (settings rotation); None: not said


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """Per-interface configuration the UI shows next to the rates."""

    ifname: str
    numa_node: int | None = None
    driver: str | None = None
    bus_info: str | None = None  # "0000:81:00.0"
    queues: tuple[QueueConfig, ...] = ()
    bql: tuple[BqlState, ...] = ()
    coalesce: Mapping[str, int] | None = None  # ethtool names: rx-usecs, adaptive-rx, ...
    rings: Mapping[str, int] | None = None  # rx, rx-max, tx, tx-max, ...
    channels: Mapping[str, int] | None = None  # combined, combined-max, rx, tx, ...
    # t_mono of the tick that asked the kernel for coalesce/rings/channels (off screen they
    # are asked in rotation, collectors/nic_rotation.py); None when not from a live read
    read_at: float | None = None


@dataclass(frozen=True, slots=True)
class HostConfig:
    default_qdisc: str | None = None
    irqbalance_running: bool | None = False  # None: not known (a sosreport without `ps`)
    rps_sock_flow_entries: int | None = None
    sysctls: Mapping[str, str] = field(default_factory=dict)  # "net.core.netdev_budget": "300"


@dataclass(frozen=True, slots=True)
class NicTuning:
    """What the doctor needs of one NIC beyond what the panels show."""

    ifname: str
    features: Mapping[str, bool] | None = None  # changeable offloads: "gro", "gso", "tso" -> on
    # rx_missed_errors + rx_fifo_errors + rx_over_errors (sysfs statistics): the ring overflowed
    rx_missed: int | None = None
    local_cpus: tuple[int, ...] | None = None  # device/local_cpulist: the NIC's NUMA-local CPUs


@dataclass(frozen=True, slots=True)
class HostTuning:
    """Host facts the doctor's rules read: power management, conntrack, NUMA layout.

    Optional in a Snapshot (None in recordings made before it existed)."""

    governors: Mapping[str, int] = field(default_factory=dict)  # scaling_governor -> CPUs using it
    # enabled cpuidle states of CPU 0 as (name, exit latency in µs)
    idle_states: tuple[tuple[str, int], ...] = ()
    conntrack_count: int | None = None
    conntrack_max: int | None = None
    cpu_nodes: Mapping[int, int] = field(default_factory=dict)  # CPU -> NUMA node
    nics: Mapping[str, NicTuning] = field(default_factory=dict)


# --- the sample ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything nettop read at one instant. Counters only; see rates.py for rates."""

    t_mono: float  # time.monotonic() when the read started: rates use real elapsed time
    t_wall: float  # time.time(), for display and recordings
    host: str
    kernel: str
    online_cpus: tuple[int, ...]
    interrupts: InterruptTable
    softirqs: Mapping[int, SoftirqCounts] = field(default_factory=dict)
    cpu_times: Mapping[int, CpuTimes] = field(default_factory=dict)
    softnet: Mapping[int, SoftnetRow] = field(default_factory=dict)
    links: Mapping[str, LinkStats] = field(default_factory=dict)
    queue_maps: Mapping[str, QueueMap] = field(default_factory=dict)
    queue_stats: Mapping[str, QueueStats] = field(default_factory=dict)
    qdiscs: Mapping[str, tuple[QdiscStats, ...]] = field(default_factory=dict)
    devices: Mapping[str, DeviceConfig] = field(default_factory=dict)
    irq_affinity: Mapping[int, IrqAffinity] = field(default_factory=dict)
    host_config: HostConfig = field(default_factory=HostConfig)
    problems: tuple[Problem, ...] = ()
    read_cpu_s: float = 0.0  # CPU time this process spent taking the snapshot
    # Probe results decided since the previous snapshot, keyed by target as given.
    latency: Mapping[str, LatencyStats] = field(default_factory=dict)
    # eBPF probe counts since the previous snapshot, when the probes are on.
    ebpf: EbpfSample | None = None
    # Doctor inputs (collectors/host_tuning.py); None in older recordings.
    tuning: HostTuning | None = None
    # Seconds since boot from /proc/uptime at this read (what a captured tree's totals
    # accumulated over); None when the file was not read, and in older recordings.
    uptime_s: float | None = None
    # Where the per-IRQ per-CPU counts came from: "/sys/kernel/irq" (each followed IRQ's
    # per_cpu_count) or "/proc/interrupts" (the fallback); None in older recordings.
    irq_source: str | None = None


def setting_age(t_mono: float, read_at: float | None) -> float:
    """Seconds between the tick that read a setting (`read_at` of a QueueConfig, BqlState
    or IrqAffinity) and a snapshot's tick: 0 for this tick, and for a source that does not
    say (a recording made before settings were read in rotation, a captured tree)."""
    return 0.0 if read_at is None else max(0.0, t_mono - read_at)



# every snapshot class made with the slots' own setters (model/rows.py): a tick makes
# some forty of them, each field set through `object.__setattr__` otherwise
for _cls in (Irq, InterruptTable, QueueIrqs, QueueMap, SoftirqCounts, CpuTimes, SoftnetRow, LinkStats,
             QueueCounters, QueueStats, QdiscStats, BqlState, IrqAffinity, QueueConfig, DeviceConfig,
             HostConfig, NicTuning, HostTuning, Snapshot):
    quick_init(_cls)
del _cls
