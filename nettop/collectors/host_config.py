"""Host-wide network settings, and whether irqbalance will undo an IRQ move.

The sysctls here are the ones that change what the other panels show: the NAPI budget
(`netdev_budget`, `netdev_budget_usecs`, `dev_weight`) decides when softnet counts a
time_squeeze, `netdev_max_backlog` when it drops, `rps_sock_flow_entries` whether RFS
is on at all, `default_qdisc` what a new interface gets. Values are kept as text with
runs of whitespace folded to one space ("4096 131072 33554432"), so a change is shown
and recorded as the kernel would print it. A sysctl that does not exist is left out
without a problem: several `net.core` ones exist only in the initial network namespace
and `busy_poll` only with CONFIG_NET_RX_BUSY_POLL.

irqbalance rewrites `smp_affinity` every few seconds, so an operator who moves an IRQ
while it runs sees the move silently reverted. Finding it must be cheap on a host with
thousands of processes: `IrqbalanceCache` re-checks the pid it found last (one open),
then the control sockets irqbalance creates as /run/irqbalance/irqbalance<pid>.sock
(one listdir; while neither socket directory exists, listed again only with the scan),
and only then scans /proc/*/comm, at most once per `interval` seconds while nothing is
found. A scan reads the comm of the processes that were not there at
the last scan only (the others were looked at then); every `full_interval` seconds, and
right after the irqbalance it knew stopped, all of them: so an irqbalance started as a
new process is seen within `interval`, and one that took over a pid already looked at (an
exec without a fork, a pid reused) within `full_interval`. On a host with thousands of
processes a scan was thousands of opens every 5 s. A pid is only believed when its `comm` says irqbalance, so
stale sockets and reused pids do not count. With a captured root, the root's own /proc
and /run are read.
"""

from __future__ import annotations

import errno
import functools
import time
from typing import Callable

from nettop.collectors.numbers import decimal, is_decimal
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import HostConfig
from nettop.kernel.held_files import HeldFiles
from nettop.kernel.sysroot import SysRoot

SYSCTLS = (
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.dev_weight",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.flow_limit_cpu_bitmap",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
)
DEFAULT_QDISC = "net.core.default_qdisc"
RPS_SOCK_FLOW_ENTRIES = "net.core.rps_sock_flow_entries"
COMM = "irqbalance"
SOCKET_DIRS = ("run/irqbalance", "var/run/irqbalance")
_HOST_SYSCTLS = (DEFAULT_QDISC, RPS_SOCK_FLOW_ENTRIES, *SYSCTLS)  # what read_host_config reads


def sysctl_path(name: str) -> str:
    """"net.core.netdev_budget" -> "proc/sys/net/core/netdev_budget"."""
    return "proc/sys/" + name.replace(".", "/")


def normalize(text: str) -> str:
    """Sysctl text with whitespace runs folded: "4096\\t131072\\t33554432\\n" -> "4096 131072 33554432"."""
    return " ".join(text.split())


@functools.lru_cache(maxsize=64)
def _sysctl_paths(names: tuple[str, ...]) -> tuple[str, ...]:
    """`sysctl_path` of each name, made once per tuple of names (fifteen a tick)."""
    return tuple(map(sysctl_path, names))


def read_sysctls(root: SysRoot, names: tuple[str, ...] = SYSCTLS, files: HeldFiles | None = None
                 ) -> tuple[dict[str, str], list[Problem]]:
    """The named sysctls that exist, keyed by dotted name (through `files`, the sampler's
    held descriptors, when given: nettop/kernel/held_files.py)."""
    out: dict[str, str] = {}
    problems: list[Problem] = []
    rels = _sysctl_paths(names)
    if files is not None:
        got: list[str | OSError] = files.read_lines(rels)
    else:
        got = []
        for rel in rels:
            try:
                got.append(root.read_line(rel))
            except OSError as exc:
                got.append(exc)
    for name, rel, text in zip(names, rels, got):
        if type(text) is str:
            # most values are one number: nothing to fold
            out[name] = text if text.isdigit() else normalize(text)
        elif text.errno != errno.ENOENT:  # type: ignore[union-attr]
            problems.append(from_oserror(f"/{rel} ({name})", text))  # type: ignore[arg-type]
    return out, problems


def read_host_config(root: SysRoot, irqbalance: IrqbalanceCache | None = None,
                     files: HeldFiles | None = None) -> tuple[HostConfig, list[Problem]]:
    """default_qdisc, rps_sock_flow_entries and the curated sysctls; irqbalance_running
    is filled only when a cache is passed (the caller owns it across ticks)."""
    values, problems = read_sysctls(root, _HOST_SYSCTLS, files)
    flow_entries = None
    text = values.pop(RPS_SOCK_FLOW_ENTRIES, None)
    if text is not None:
        try:
            flow_entries = decimal(text, 32)
        except ValueError:
            problems.append(malformed("/" + sysctl_path(RPS_SOCK_FLOW_ENTRIES), repr(text[:40])))
    running: bool | None = False
    if irqbalance is not None:
        from nettop.kernel import sos
        if root.live or not sos.is_sos(root.path):
            running = irqbalance.running(root)
        else:  # sos copies no /proc/PID: only its process plugin's `ps` output can tell
            running = sos.irqbalance_from_ps(root.path)[0]
            if running is None:
                problems.append(Problem("sos_commands/process/ps_auxwww", (
                    "the sosreport has no process list (sos_commands/process/ps_auxwww): "
                    "whether irqbalance ran is unknown; add sos's process plugin")))
    return HostConfig(
        default_qdisc=values.pop(DEFAULT_QDISC, None) or None,
        irqbalance_running=running,
        rps_sock_flow_entries=flow_entries,
        sysctls=values,
    ), problems


class IrqbalanceCache:
    """Cheap, repeated answers to "is irqbalance running?" for one caller.

    Not thread-safe; one per sampler. `clock` is injectable so the scan interval can be
    tested without sleeping.
    """

    def __init__(self, interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, full_interval: float = 60.0) -> None:
        self.interval = interval
        self.full_interval = full_interval
        self._clock = clock
        self._pid: int | None = None
        self._last_scan: float | None = None
        self._last_full: float | None = None
        self._seen: frozenset[str] = frozenset()  # the /proc entries the last scan saw
        self.scans = 0  # /proc scans done, for tests and the cost report
        self.comms_read = 0  # comm files the last scan read (a test's figure)
        self._sockets = True  # a socket directory was there at the last look (or none yet)

    def running(self, root: SysRoot) -> bool:
        if self._pid is not None:
            if is_irqbalance(root, self._pid):
                return True
            self._pid = None
            self._last_scan = None  # it just stopped or restarted: look again now
        now = self._clock()
        due = self._last_scan is None or now - self._last_scan >= self.interval
        pid = None
        # the socket directories are listed each call while one is there (irqbalance is
        # installed: a started one is seen at once); while neither is, at the scan's pace
        # only (a failed listing a tick, twice, on the many hosts without irqbalance)
        if self._sockets or due:
            pid, self._sockets = _from_sockets(root)
        if pid is None:
            if not due:
                return False
            full = (self._last_scan is None or self._last_full is None
                    or now - self._last_full >= self.full_interval)
            self._last_scan = now
            self.scans += 1
            if full:
                self._last_full = now
            pid, self._seen, self.comms_read = _scan(root, frozenset() if full else self._seen)
        self._pid = pid
        return pid is not None


def irqbalance_running(root: SysRoot, cache: IrqbalanceCache | None = None) -> bool:
    """True when an irqbalance process runs on the host of `root`.

    Without a cache this may scan every /proc/PID/comm; a sampler passes its own
    `IrqbalanceCache` so the scan happens at most every few seconds.
    """
    return (cache if cache is not None else IrqbalanceCache()).running(root)


def is_irqbalance(root: SysRoot, pid: int) -> bool:
    try:
        return root.read_line(f"proc/{pid}/comm") == COMM
    except OSError:
        return False


def pid_from_sockets(root: SysRoot) -> int | None:
    """The pid of a live irqbalance named by a control socket irqbalance<pid>.sock."""
    return _from_sockets(root)[0]


def _from_sockets(root: SysRoot) -> tuple[int | None, bool]:
    """(`pid_from_sockets`, whether a socket directory could be listed)."""
    listed = False
    for d in SOCKET_DIRS:
        try:
            names = root.listdir(d)
        except OSError:
            continue
        listed = True
        for name in names:
            digits = name[len(COMM):-len(".sock")]
            if name.startswith(COMM) and name.endswith(".sock") and is_decimal(digits) and len(digits) <= 10:
                if is_irqbalance(root, int(digits)):
                    return int(digits), True
    return None, listed


def scan_proc(root: SysRoot) -> int | None:
    """The first pid whose comm is irqbalance, by reading every /proc/PID/comm."""
    return _scan(root, frozenset())[0]


def _scan(root: SysRoot, skip: frozenset[str]) -> tuple[int | None, frozenset[str], int]:
    """(the first pid not in `skip` whose comm is irqbalance, the /proc entries listed,
    comm files read)."""
    try:
        names = root.listdir("proc")
    except OSError:
        return None, frozenset(), 0
    read = 0
    for name in names:
        if name not in skip and is_decimal(name) and len(name) <= 10:
            read += 1
            if is_irqbalance(root, int(name)):
                return int(name), frozenset(names), read
    return None, frozenset(names), read
