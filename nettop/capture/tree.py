"""Copy the kernel files nettop reads from the live host into a small captured tree.

Only what the collectors read under `--root` (and the doctor's inputs) is copied, laid
out as the kernel presents it, symlinks included (sys/class/net/IF -> ../../devices/...),
so the tree is read back by the same code as the live kernel. Nothing that identifies
the host's peers is copied unless asked: no MAC or IP addresses (sysfs `address`,
`broadcast`, `perm_addr` are left out), no process list (only irqbalance's `comm`).

Every file is read once, as a whole; a file the kernel refuses (write-only, EINVAL for a
link that is down) is left out, as it would be missing on that kernel. The counters
(/proc/stat, interrupts, softirqs, softnet_stat, net/dev and every interface's
statistics/) are read first, in one burst between two reads of /proc/uptime, and the
tree's proc/uptime holds the midpoint of those two: rates between two captures divide
by their uptimes, so the uptime must be the counters' moment, not the moment a slow walk
of the rest of /sys ended (on a busy host that walk takes seconds, and the rates were off
by the difference).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from nettop.collectors.host_config import SYSCTLS, DEFAULT_QDISC, RPS_SOCK_FLOW_ENTRIES

COUNTER_FILES = ("proc/stat", "proc/interrupts", "proc/softirqs", "proc/net/softnet_stat", "proc/net/dev")
PROC_FILES = (
    "proc/sys/kernel/hostname", "proc/sys/kernel/osrelease",
    "proc/sys/net/netfilter/nf_conntrack_count", "proc/sys/net/netfilter/nf_conntrack_max",
)
CPU_FILES = ("online", "offline", "possible", "present")
IRQ_FILES = ("smp_affinity", "smp_affinity_list", "effective_affinity",
             "effective_affinity_list", "affinity_hint", "node")
# sysfs attributes of a netdev that hold an address: copied only when asked
ADDRESS_FILES = frozenset({"address", "broadcast", "perm_addr"})
DEVICE_FILES = ("numa_node", "local_cpulist", "vendor", "device", "subsystem_vendor",
                "subsystem_device", "class", "modalias")
_DIGITS = re.compile(r"\d{1,10}", re.ASCII)


class TreeWriter:
    """Copies files from `src` (the live `/`) into `dest`, keeping paths and symlinks."""

    def __init__(self, dest: Path, src: str = "/", addresses: bool = False) -> None:
        self.dest = dest
        self.src = src
        self.addresses = addresses
        self.copied = 0

    def _src(self, rel: str) -> str:
        return os.path.join(self.src, rel)

    def file(self, rel: str) -> bool:
        """Copy one regular file; False when it is not there or cannot be read."""
        try:
            fd = os.open(self._src(rel), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return False
        try:
            with open(fd, "rb", buffering=0, closefd=True) as f:
                data = f.readall()
        except OSError:
            return False
        out = self.dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        self.copied += 1
        return True

    def link(self, rel: str) -> str | None:
        """Copy a symlink as it is (its target relative, as sysfs writes them); the real
        path it points to (relative to the root), or None when `rel` is no symlink."""
        try:
            target = os.readlink(self._src(rel))
        except OSError:
            return None
        out = self.dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.is_symlink():
            out.unlink()
        os.symlink(target, out)
        real = os.path.realpath(self._src(rel))
        return os.path.relpath(real, self.src)

    def files_in(self, rel: str, skip: frozenset[str] = frozenset()) -> list[str]:
        """Copy the regular files directly in a directory; the names of its subdirectories."""
        try:
            entries = list(os.scandir(self._src(rel)))
        except OSError:
            return []
        subdirs = []
        (self.dest / rel).mkdir(parents=True, exist_ok=True)
        for e in entries:
            if e.name in skip:
                continue
            try:
                if e.is_symlink():
                    continue
                if e.is_dir():
                    subdirs.append(e.name)
                elif e.is_file():
                    self.file(f"{rel}/{e.name}")
            except OSError:
                continue
        return sorted(subdirs)

    def tree(self, rel: str, depth: int = 3) -> None:
        """Copy a small directory tree of one-value files (cpufreq, cpuidle)."""
        for sub in self.files_in(rel):
            if depth > 0:
                self.tree(f"{rel}/{sub}", depth - 1)

    # --- what nettop reads ------------------------------------------------------------

    def capture(self) -> None:
        before = self._uptime()
        for rel in COUNTER_FILES:
            self.file(rel)
        try:
            names = sorted(os.listdir(self._src("sys/class/net")))
        except OSError:
            names = []
        for name in names:
            real = self._netdev_dir(name)
            if real is not None:
                self.files_in(f"{real}/statistics")
        after = self._uptime()
        if before is not None and after is not None:  # the counters' moment (module docstring)
            out = self.dest / "proc/uptime"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(f"{(before[0] + after[0]) / 2:.2f} {before[1]:.2f}\n")
            self.copied += 1
        for rel in PROC_FILES:
            self.file(rel)
        for name in SYSCTLS + (DEFAULT_QDISC, RPS_SOCK_FLOW_ENTRIES):
            self.file("proc/sys/" + name.replace(".", "/"))
        self._irqs()
        self._irqbalance()
        for name in CPU_FILES:
            self.file(f"sys/devices/system/cpu/{name}")
        self.tree("sys/devices/system/cpu/cpufreq", 2)
        self.tree("sys/devices/system/cpu/cpu0/cpuidle", 2)
        try:
            nodes = [n for n in os.listdir(self._src("sys/devices/system/node"))
                     if n.startswith("node") and _DIGITS.fullmatch(n[4:])]
        except OSError:
            nodes = []
        for n in nodes:
            self.file(f"sys/devices/system/node/{n}/cpulist")
        for name in names:
            self._netdev(name)

    def _uptime(self) -> tuple[float, float] | None:
        """/proc/uptime now: (seconds up, idle seconds), or None when it cannot be read."""
        try:
            with open(self._src("proc/uptime"), "rb") as f:
                up, idle = f.read().split()[:2]
            return float(up), float(idle)
        except (OSError, ValueError):
            return None

    def _irqs(self) -> None:
        try:
            irqs = [n for n in os.listdir(self._src("proc/irq")) if _DIGITS.fullmatch(n)]
        except OSError:
            return
        for irq in irqs:
            for f in IRQ_FILES:
                self.file(f"proc/irq/{irq}/{f}")

    def _irqbalance(self) -> None:
        """Only irqbalance's own proc/PID/comm: the process list stays on the host."""
        try:
            pids = [p for p in os.listdir(self._src("proc")) if _DIGITS.fullmatch(p)]
        except OSError:
            return
        for pid in pids:
            try:
                with open(self._src(f"proc/{pid}/comm"), "rb") as f:
                    comm = f.read()
            except OSError:
                continue
            if comm.strip() == b"irqbalance":
                self.file(f"proc/{pid}/comm")

    def _netdev_dir(self, name: str) -> str | None:
        """The interface's real sysfs directory (its class link copied), or None for
        bonding_masters and other files."""
        real = self.link(f"sys/class/net/{name}")
        if real is None and os.path.isdir(self._src(f"sys/class/net/{name}")):
            real = f"sys/class/net/{name}"  # an old kernel's real directory
        return real

    def _netdev(self, name: str) -> None:
        real = self._netdev_dir(name)
        if real is None:
            return
        skip = frozenset() if self.addresses else ADDRESS_FILES
        subdirs = self.files_in(real, skip)
        if "statistics" in subdirs and not (self.dest / real / "statistics").is_dir():
            self.files_in(f"{real}/statistics")  # else read with the counters, in their burst
        for d in ("bonding", "bridge"):
            if d in subdirs:
                (self.dest / real / d).mkdir(parents=True, exist_ok=True)
        for q in self._list(f"{real}/queues"):
            self.files_in(f"{real}/queues/{q}")
            if q.startswith("tx-"):
                self.files_in(f"{real}/queues/{q}/byte_queue_limits")
        self.link(f"{real}/master")
        dev = self.link(f"{real}/device")
        if dev is not None:
            self._device(dev)
            parent = os.path.dirname(dev)
            if os.path.basename(dev).startswith("virtio"):
                self._device(parent)  # virtio-net: MSI vectors and NUMA node are the PCI parent's

    def _device(self, rel: str) -> None:
        for f in DEVICE_FILES:
            self.file(f"{rel}/{f}")
        for irq in self._list(f"{rel}/msi_irqs"):
            if not self.file(f"{rel}/msi_irqs/{irq}"):  # only the names are read back
                (self.dest / rel / "msi_irqs").mkdir(parents=True, exist_ok=True)
                (self.dest / rel / "msi_irqs" / irq).write_bytes(b"")
        driver = self.link(f"{rel}/driver")
        if driver is not None:
            (self.dest / driver).mkdir(parents=True, exist_ok=True)

    def _list(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._src(rel)))
        except OSError:
            return []
