"""What every rule is handed, and the small helpers several rules share."""

from __future__ import annotations

import functools
import itertools
import operator
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from nettop.collectors.cpus import format_cpu_list, parse_cpu_mask
from nettop.doctor.finding import Finding
from nettop.doctor.window import Window
from nettop.model.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class DoctorConfig:
    """What the operator told the doctor; the defaults suit `nettop doctor` with no flags."""

    window_s: float = 5.0
    # With a latency target (ms) the rules that trade latency for CPU speak up.
    latency_target_ms: float | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> DoctorConfig:
        """The config a recording's findings were judged by, so replay and report judge
        its samples the same way: its latency target if it kept one. A damaged value
        counts as none (the recording still opens; the rules it enables stay quiet)."""
        from argparse import ArgumentTypeError

        from nettop.output.argtypes import latency_target  # the one check, as for --latency-target

        raw = meta.get("latency_target_ms")
        if raw is None:
            return cls()
        try:
            return cls(latency_target_ms=latency_target(str(raw)))
        except ArgumentTypeError:
            return cls()

    def describe(self) -> str:
        """"latency target 1 ms" or "" for a panel's title and a report's section."""
        return f"latency target {self.latency_target_ms:g} ms" if self.latency_target_ms is not None else ""


@dataclass(frozen=True, slots=True)
class Context:
    window: Window
    config: DoctorConfig

    @property
    def snap(self) -> Snapshot:
        return self.window.last


Rule = Callable[[Context], Iterable[Finding]]

# Sources named in findings and docs/doctor.md
RH = "Red Hat Enterprise Linux Network Performance Tuning Guide"
SCALING = "Linux Documentation/networking/scaling.rst"
INTEL = "Intel ixgbe/82599 Linux driver README (interrupt moderation, rings)"
MLX = "NVIDIA/Mellanox performance tuning guide for mlx4/mlx5 (IRQ affinity, NUMA)"
RH_LOWLAT = "Red Hat low-latency performance tuning guide (C-states, governor)"


def nics(snap: Snapshot) -> list[str]:
    """Interfaces a rule judges: not lo, not a bond/bridge (their members are judged).
    Kept for the last few `links` mappings (by identity, the mapping held): ten rules
    ask for the same snapshot's every tick."""
    links = snap.links
    got = _NICS.get(id(links))
    if got is None or got[0] is not links:
        got = (links, tuple(n for n, link in sorted(links.items()) if n != "lo" and not link.is_aggregate))
        keep(_NICS, id(links), got, _NICS_KEEP)
    return list(got[1])


_NICS: dict[int, tuple[Any, tuple[str, ...]]] = {}  # id(snap.links) -> (links, its nics)
_NICS_KEEP = 8


def queue_irqs(snap: Snapshot, ifname: str, kinds: tuple[str, ...] = ("rx", "tx", "combined")) -> list[int]:
    qm = snap.queue_maps.get(ifname)
    if qm is None:
        return []
    key = (id(qm), kinds)
    got = _QUEUE_IRQS.get(key)
    if got is None or got[0] is not qm:
        got = (qm, tuple(sorted({i for q in qm.queues if q.kind in kinds for i in q.irqs})))
        keep(_QUEUE_IRQS, key, got, _QUEUE_IRQS_KEEP)
    return list(got[1])


# (a NIC's QueueMap, the kinds asked) -> its queue IRQs, sorted: four rules ask for each
# NIC's every tick, and the reader hands the same QueueMap object until its queues change
# (4 x 128 queues: 16 walks a tick). The map is held, so its id cannot be reused.
_QUEUE_IRQS: dict[tuple[int, tuple[str, ...]], tuple[Any, tuple[int, ...]]] = {}
_QUEUE_IRQS_KEEP = 256
KEPT_LOCK = threading.Lock()  # the rules' kept answers (this module's, cpu_irq's and nic's)


def keep(kept: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Put a rule's answer in its module-level store, dropping the oldest past `limit`
    entries; under KEPT_LOCK, as a live Watch and a replay may judge at once."""
    with KEPT_LOCK:
        kept[key] = value
        while len(kept) > limit:
            del kept[next(iter(kept))]


def rx_queue_count(snap: Snapshot, ifname: str) -> int:
    qm = snap.queue_maps.get(ifname)
    n = len([q for q in qm.queues if q.kind in ("rx", "combined")]) if qm else 0
    if n:
        return n
    ch = snap.devices.get(ifname)
    if ch is not None and ch.channels:
        return int(ch.channels.get("combined", 0) or 0) + int(ch.channels.get("rx", 0) or 0)
    link = snap.links.get(ifname)
    return link.num_rx_queues if link else 0


def local_cpus(snap: Snapshot, ifname: str) -> tuple[int, ...]:
    """The NIC's NUMA-local online CPUs; every online CPU when that is not known.

    Kept per NIC name while the snapshot's online CPUs and tuning are the same objects
    and its device's NUMA node the same number (all the answer reads): three rules ask
    for it per NIC every tick, each a walk over 1,024 CPUs (~0.1 ms a tick for 4 NICs
    per rule), and the reader hands the same online tuple and tuning until they change."""
    online, t = snap.online_cpus, snap.tuning
    dev = snap.devices.get(ifname)
    node = dev.numa_node if dev is not None else None
    got = _LOCAL.get(ifname)
    if got is not None and got[0] is online and got[1] is t and type(got[2]) is type(node) and got[2] == node:
        return got[3]
    local = _local_cpus(online, t, ifname, node)
    keep(_LOCAL, ifname, (online, t, node, local), _LOCAL_KEEP)
    return local


# NIC name -> (online CPUs, tuning, its device's NUMA node, its local CPUs); the online
# tuple and the tuning are held, so their ids cannot be reused while kept
_LOCAL: dict[str, tuple[tuple[int, ...], Any, int | None, tuple[int, ...]]] = {}
_LOCAL_KEEP = 64


def _local_cpus(online: tuple[int, ...], t: Any, ifname: str, numa_node: int | None) -> tuple[int, ...]:
    """`local_cpus` worked out: the NIC's local CPUs that are online, else the online
    CPUs of its device's NUMA node, else every online CPU."""
    nic = t.nics.get(ifname) if t is not None else None
    # C-level filters: over 1,024 CPUs on big hosts
    if nic is not None and nic.local_cpus:
        local = tuple(filter(set(online).__contains__, nic.local_cpus))
        if local:
            return local
    if t is not None and numa_node is not None and t.cpu_nodes:
        on_node = map(operator.eq, map(t.cpu_nodes.get, online), itertools.repeat(numa_node))
        local = tuple(itertools.compress(online, on_node))
        if local:
            return local
    return tuple(online)


def node_of_cpus(snap: Snapshot, cpus: Iterable[int]) -> tuple[int, ...]:
    """Online CPUs on the same NUMA node(s) as `cpus` (all online when nodes are unknown)."""
    t = snap.tuning
    if t is None or not t.cpu_nodes:
        return tuple(snap.online_cpus)
    nodes = {t.cpu_nodes.get(c) for c in cpus}
    return tuple(c for c in snap.online_cpus if t.cpu_nodes.get(c) in nodes)


@functools.lru_cache(maxsize=4096)
def mask_cpus(mask: str | None) -> tuple[int, ...]:
    """CPUs of a hex mask; cached: a 64-queue NIC repeats the same few masks every tick."""
    if not mask:
        return ()
    try:
        return parse_cpu_mask(mask)
    except ValueError:
        return ()


def cpus_text(cpus: Iterable[int]) -> str:
    """A CPU list for a `nettop set` line; CPU 0 alone is "0-0", since a lone "0" is the
    empty mask (off) to `set rps` and `set xps`."""
    text = format_cpu_list(cpus)
    return "0-0" if text == "0" else text


def sysctl_int(snap: Snapshot, name: str) -> int | None:
    text = snap.host_config.sysctls.get(name)
    try:
        return int(text.split()[-1]) if text else None
    except ValueError:
        return None


def pct(x: float) -> str:
    return f"{100.0 * x:.0f} %"


def rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.1f}M/s"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k/s"
    return f"{x:.1f}/s" if x < 100 else f"{x:.0f}/s"
