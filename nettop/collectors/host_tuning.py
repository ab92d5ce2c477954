"""Host facts the doctor needs and the panels do not: power management, conntrack fill,
NUMA layout, offloads and the driver's ring-overflow counters.

Some of these change rarely (governor, C-states, NUMA layout), so `TuningReader`
re-reads them at most every `slow_s` seconds and keeps the last answer in between; what
moves per tick (conntrack count, ring-overflow counters) and what nettop itself changes
(offloads, one netlink request per NIC) is read every time. On the live kernel the
ring-overflow counters come with the tick's rtnetlink link dump (IFLA_STATS64, the same
`dev_get_stats` the sysfs files print), three sysfs opens per NIC fewer. On a 256-CPU host the governors are read per cpufreq policy
(/sys/devices/system/cpu/cpufreq/policy*/scaling_governor), not per CPU. A file that does
not exist (no cpufreq in a VM, no nf_conntrack, a virtual NIC without a device) is
simply left out: that is the normal state of many hosts, not a problem.
"""

from __future__ import annotations

import errno
import itertools
import time
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from nettop.collectors.cpus import parse_cpu_list, read_cpu_nodes
from nettop.model.problems import Problem, from_oserror
from nettop.model.snapshot import HostTuning, NicTuning
from nettop.kernel.held_files import HeldFiles
from nettop.kernel.sysroot import SysRoot

if TYPE_CHECKING:
    from nettop.kernel.ethtool_nl import EthtoolNetlink

CPUFREQ = "sys/devices/system/cpu/cpufreq"
CPUIDLE0 = "sys/devices/system/cpu/cpu0/cpuidle"
CONNTRACK_COUNT = "proc/sys/net/netfilter/nf_conntrack_count"
CONNTRACK_MAX = "proc/sys/net/netfilter/nf_conntrack_max"
# sysfs statistics a driver raises when a frame arrived and the rx ring had no buffer
MISSED_COUNTERS = ("rx_missed_errors", "rx_fifo_errors", "rx_over_errors")
FEATURES_SHOWN = ("gro", "gso", "tso")
_QUIET = (errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.EOPNOTSUPP, errno.ENODEV)


def _int(root: SysRoot | HeldFiles, rel: str, problems: list[Problem]) -> int | None:
    try:
        return int(root.read_line(rel))
    except OSError as exc:
        if exc.errno not in _QUIET:
            problems.append(from_oserror("/" + rel, exc))
    except ValueError:
        pass
    return None


def _ints(src: SysRoot | HeldFiles, rels: list[str], problems: list[Problem]) -> list[int | None]:
    """`_int` of each of `rels`: through the held files in one pass (`read_lines`, where an
    absent one is its error, not a raise) when `src` is them."""
    if not isinstance(src, HeldFiles):
        return [_int(src, rel, problems) for rel in rels]
    out: list[int | None] = []
    for rel, got in zip(rels, src.read_lines(rels)):
        if isinstance(got, str):
            try:
                out.append(int(got))
                continue
            except ValueError:
                pass
        elif got.errno not in _QUIET:
            problems.append(from_oserror("/" + rel, got))
        out.append(None)
    return out


def read_governors(root: SysRoot) -> dict[str, int]:
    """scaling_governor -> number of CPUs it governs (from each policy's affected CPUs)."""
    out: dict[str, int] = {}
    try:
        names = root.listdir(CPUFREQ)
    except OSError:
        return out
    for name in names:
        if not name.startswith("policy"):
            continue
        try:
            gov = root.read_line(f"{CPUFREQ}/{name}/scaling_governor")
        except OSError:
            continue
        try:
            n = len(parse_cpu_list(root.read_line(f"{CPUFREQ}/{name}/affected_cpus").replace(" ", ",")))
        except (OSError, ValueError):
            n = 1
        out[gov] = out.get(gov, 0) + max(n, 1)
    return out


def read_idle_states(root: SysRoot) -> tuple[tuple[str, int], ...]:
    """CPU 0's enabled cpuidle states as (name, exit latency µs), shallowest first."""
    try:
        names = root.listdir(CPUIDLE0)
    except OSError:
        return ()
    out: list[tuple[int, str, int]] = []
    for name in names:
        if not (name.startswith("state") and name[5:].isdigit()):
            continue
        d = f"{CPUIDLE0}/{name}"
        try:
            if root.read_line(f"{d}/disable") not in ("0", ""):
                continue
        except OSError:
            pass
        try:
            out.append((int(name[5:]), root.read_line(f"{d}/name"), int(root.read_line(f"{d}/latency"))))
        except (OSError, ValueError):
            continue
    return tuple((n, lat) for _, n, lat in sorted(out))


def read_local_cpus(root: SysRoot, ifname: str) -> tuple[int, ...] | None:
    try:
        return parse_cpu_list(root.read_line(f"sys/class/net/{ifname}/device/local_cpulist"))
    except (OSError, ValueError):
        return None


def read_missed(root: SysRoot | HeldFiles, ifname: str, problems: list[Problem]) -> int | None:
    total, seen = 0, False
    for name in MISSED_COUNTERS:
        v = _int(root, f"sys/class/net/{ifname}/statistics/{name}", problems)
        if v is not None:
            total, seen = total + v, True
    return total if seen else None


class TuningReader:
    """Reads HostTuning per tick; slow facts cached for `slow_s` seconds. Not thread-safe."""

    def __init__(self, root: SysRoot, ethtool_nl: EthtoolNetlink | None = None, slow_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.slow_s = slow_s
        self._clock = clock
        self._nl = ethtool_nl
        self._last: float | None = None
        self._governors: dict[str, int] = {}
        self._idle: tuple[tuple[str, int], ...] = ()
        self._nodes: dict[int, int] = {}
        self._features: dict[str, Mapping[str, bool] | None] = {}
        self._local: dict[str, tuple[int, ...] | None] = {}
        self._out: HostTuning | None = None  # the last tick's, given again while all is the same
        # the conntrack fill's two sysctls, read every tick: through the sampler's held
        # descriptors when it gives them (nettop/kernel/held_files.py)
        self.files: HeldFiles | None = None

    @classmethod
    def live(cls, root: SysRoot) -> TuningReader:
        """With an ethtool netlink socket for offloads when the root is the live kernel."""
        nl = None
        if root.live:
            try:
                from nettop.kernel.ethtool_nl import EthtoolNetlink
                nl = EthtoolNetlink()
            except OSError:
                nl = None
        return cls(root, nl)

    def close(self) -> None:
        if self._nl is not None:
            try:
                self._nl.close()
            except OSError:
                pass
            self._nl = None

    def read(self, ifnames: Iterable[str],
             features: Mapping[str, Mapping[str, bool] | None] | None = None,
             missed: Mapping[str, int] | None = None) -> tuple[HostTuning, list[Problem]]:
        """`features`: offloads already known (the NIC settings rotation asks them, with
        coalescing, rings and channels: nic_rotation.py); the others are asked now.
        `missed`: ring overflows already known (this tick's link dump,
        interfaces.read_links); the others are read from sysfs."""
        problems: list[Problem] = []
        names = [n for n in ifnames if n != "lo"]
        now = self._clock()
        if self._last is None or now - self._last >= self.slow_s or set(names) - self._local.keys():
            self._last = now
            # kept as the same objects while equal: the tick's HostTuning is then the last one
            governors, idle, nodes = read_governors(self.root), read_idle_states(self.root), read_cpu_nodes(self.root)
            if governors != self._governors:
                self._governors = governors
            if idle != self._idle:
                self._idle = idle
            if nodes != self._nodes:
                self._nodes = nodes
            self._local = {n: read_local_cpus(self.root, n) for n in names}
        known = features or {}
        self._features = {n: known[n] if n in known else self.features(n) for n in names}
        dumped = missed or {}
        # through the held files: a counter the driver lacks is not asked for each tick
        src = self.files if self.files is not None else self.root
        # a value as last tick's is last tick's object: a quiet host's tuning is the same
        # objects tick after tick, not a NicTuning per NIC and a copy of 1,024 CPUs' nodes
        last = self._out.nics if self._out is not None else {}
        nics: dict[str, NicTuning] = {}
        same = len(last) == len(names)
        # the ring overflow counters the dump did not give, and the conntrack fill, in one
        # pass: a tree's NIC without them, a host without conntrack, asks again only now
        # and then (held_files.ABSENT_S)
        rels = [f"sys/class/net/{n}/statistics/{c}" for n in names if n not in dumped for c in MISSED_COUNTERS]
        values = _ints(src, rels + [CONNTRACK_COUNT, CONNTRACK_MAX], problems)
        count, top = values[-2:]
        sysfs_missed = iter(values)
        for n in names:
            feats = self._features.get(n)
            rx_missed: int | None
            if n in dumped:
                rx_missed = dumped[n]
            else:
                got = [v for v in itertools.islice(sysfs_missed, len(MISSED_COUNTERS)) if v is not None]
                rx_missed = sum(got) if got else None
            local = self._local.get(n)
            prev = last.get(n)
            if prev is None or prev.rx_missed != rx_missed or prev.local_cpus != local or prev.features != feats:
                prev = NicTuning(ifname=n, features=feats, rx_missed=rx_missed, local_cpus=local)
                same = False
            nics[n] = prev
        out = self._out
        if not (same and out is not None and out.conntrack_count == count and out.conntrack_max == top
                and out.governors is self._governors and out.idle_states is self._idle
                and out.cpu_nodes is self._nodes):
            # the slow facts' objects as kept above (never changed once read), not copies
            out = self._out = HostTuning(governors=self._governors, idle_states=self._idle,
                                         conntrack_count=count, conntrack_max=top,
                                         cpu_nodes=self._nodes, nics=nics)
        return out, problems

    def features(self, ifname: str) -> Mapping[str, bool] | None:
        """The offloads the doctor judges (`FEATURES_SHOWN`): one ethtool netlink request,
        which takes RTNL, on the live kernel."""
        if not self.root.live:  # a captured host's saved `ethtool -k IF`
            from nettop.kernel import sos
            return sos.features(self.root.path, ifname)[0]
        if self._nl is None:
            return None
        try:
            feats = self._nl.get_features(ifname)
        except OSError:
            return None
        return {k: v for k, v in feats.items() if k in FEATURES_SHOWN}
