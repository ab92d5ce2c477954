"""Generate a faithful /proc + /sys tree of a big host, for tests and benchmarks.

    python tests/treegen.py DEST --cpus 256 --irqs 4096 --queues 64 [--step 1]
    python tests/treegen.py DEST --cpus 1024 --irqs 16384 --nics 4 --queues 128 --nodes 4 --sparse
    python tests/treegen.py DEST ... --no-sysfs-irq      (a kernel or capture without /sys/kernel/irq)

The host has `cpus` CPUs (some may be offline), `irqs` IRQs of which `queues` per NIC
serve the combined channels of `nics` mlx5 NICs `eth0`, `eth1`, ... (eth0 at 0000:81:00.0
on NUMA node 1), the rest a mix of other devices. Files use the kernel's exact formats
(column widths of /proc/interrupts and /proc/softirqs, 15-column softnet_stat with the
CPU id, sysfs one-value files, relative symlinks, and /sys/kernel/irq/N as
kernel/irq/irqdesc.c prints it: `per_cpu_count` is the counts of every possible CPU
joined by commas, cut at PAGE_SIZE without its newline when longer). `step=k` gives the
same host k seconds later: every counter advanced at a fixed per-second rate, 32-bit
counters wrapping as they do in the kernel; /proc/interrupts and per_cpu_count always
agree. `sparse` gives each IRQ counts on its own CPU only (managed, one-CPU affinity, as
on big hosts), which is what keeps a 1,024-CPU tree's files small and quick to write;
else every CPU has a random count for every IRQ (the default, as before).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path
from typing import Iterable

U32 = 1 << 32
BDF = "0000:81:00.0"
NIC_IRQ_RATE = 20_000  # interrupts/s of each queue IRQ on its CPU
NET_RX_RATE = 25_000
LINK_RX_BYTES_RATE = 1_250_000_000  # 10 Gbit/s
LINK_RX_PKTS_RATE = 850_000


def _w(path: Path, text: str) -> None:
    """Write a whole file at once (a new file renamed over the old): a reader of a tree
    that `advance` rewrites each second never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(text)
    os.replace(tmp, path)


def _put(path: str, text: str) -> None:
    """Write a file without the rename: for files a tree gets once (sysfs attributes that
    do not change), where 100,000 of them would otherwise cost seconds."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.symlink_to(target)


def cpu_list(cpus: Iterable[int]) -> str:
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def cpu_mask(cpus: Iterable[int], ncpus: int) -> str:
    bits = 0
    for c in cpus:
        bits |= 1 << c
    groups = (ncpus + 31) // 32
    return ",".join(f"{(bits >> (32 * g)) & 0xFFFFFFFF:08x}" for g in reversed(range(groups)))


def _wave_ticks(step: int, cpu: int) -> int:
    """Softirq ticks of `cpu` over its first `step` seconds when the load moves: 5-45 of
    each 100, a different amount each second and on each CPU (so a heatmap changes)."""
    return sum(5 + ((k * 7 + cpu * 3) % 9) * 5 for k in range(1, step + 1))


PAGE_SIZE = 4096
_ZERO = f"{0:10d} "


def _bdf(nic: int) -> str:
    return BDF if nic == 0 else f"0000:{0x81 + nic:02x}:00.0"


def per_cpu_count(counts: Iterable[int]) -> str:
    """/sys/kernel/irq/N/per_cpu_count as the kernel prints it: "%u" joined by "," over
    the possible CPUs, then "\\n"; scnprintf into one page stops at PAGE_SIZE - 1 bytes,
    and then the newline no longer fits."""
    text = ",".join(map(str, counts))
    return text + "\n" if len(text) < PAGE_SIZE - 1 else text[:PAGE_SIZE - 1]


def generate_tree(dest: Path, cpus: int = 256, irqs: int = 4096, queues: int = 64,
                  offline: Iterable[int] = (), seed: int = 0, step: int = 0, wave: bool = False,
                  nics: int = 1, nodes: int | None = None, sparse: bool = False,
                  sysfs_irq: bool = True) -> Path:
    """The tree at second `step`; with `wave`, each CPU's softirq share changes every
    second (else a steady 15 %). `nics` NICs of `queues` queue IRQs and one async IRQ
    each; `nodes` NUMA nodes (None: two, without sys/devices/system/node, as before);
    `sysfs_irq` False leaves /sys/kernel/irq out."""
    dest = Path(dest)
    rnd = random.Random(seed)
    off = set(offline)
    online = [c for c in range(cpus) if c not in off]
    first_irq = 24
    irq_numbers = list(range(first_irq, first_irq + irqs))
    block = queues + 1  # a NIC's queue IRQs and its async IRQ
    nic_blocks = [irq_numbers[i * block:(i + 1) * block] for i in range(nics)]
    nic_irqs = [irq for b in nic_blocks for irq in b[:queues]]
    queue_cpu = {k: online[k % len(online)] for k in range(nics * queues)}  # k = nic * queues + q
    nnodes = nodes or 2
    pos = {c: j for j, c in enumerate(online)}
    sysirq = dest / "sys/kernel/irq"
    fresh_sysirq = sysfs_irq and (step == 0 or not sysirq.is_dir())
    if sysfs_irq:
        sysirq.mkdir(parents=True, exist_ok=True)
    elif sysirq.is_dir():
        import shutil
        shutil.rmtree(sysirq)

    # --- /proc/interrupts: "%*d: " + "%10u " per online CPU + chip, hwirq, name
    prec = max(3, len(str(irq_numbers[-1])))
    lines = [" " * (prec + 2) + "".join(f"CPU{c:<8d}" for c in online).rstrip()]
    n = len(online)
    nb = nics * block
    for k, irq in enumerate(irq_numbers):
        nic, kq = divmod(k, block)
        queue = nic < nics and kq < queues
        if queue:
            bdf = _bdf(nic)
            chip, hw, name = f"PCI-MSIX-{bdf}", f"{kq + 1}-edge", f"mlx5_comp{kq}@pci:{bdf}"
        elif nic < nics:
            bdf = _bdf(nic)
            chip, hw, name = f"PCI-MSIX-{bdf}", "0-edge", f"mlx5_async0@pci:{bdf}"
        else:
            dev = (k - nb + 1) % 64
            chip, hw, name = f"PCI-MSIX-0000:{dev + 1:02x}:00.0", f"{k % 32}-edge", f"nvme{dev}q{k % 32}"
        qk = nic * queues + kq
        if sparse:
            cpu = queue_cpu[qk] if queue else online[k % n]
            base = rnd.randrange(0, 1 << 20)
            if queue:
                base = U32 - NIC_IRQ_RATE // 2 if kq % 8 == 0 else base * 100
                base += NIC_IRQ_RATE * step
            v = base % U32
            j = pos[cpu]
            seg = _ZERO * j + f"{v:10d} " + _ZERO * (n - j - 1)
            pcc = ("0," * cpu + str(v) + ",0" * (cpus - cpu - 1)) if fresh_sysirq or queue else ""
            pcc = pcc + "\n" if len(pcc) < PAGE_SIZE - 1 else pcc[:PAGE_SIZE - 1]
        else:
            counts = []
            for c in online:
                base = rnd.randrange(0, 1 << 20)
                if queue and c == queue_cpu[qk]:
                    # one queue in eight sits just under 2^32 so that step 1 wraps it
                    base = U32 - NIC_IRQ_RATE // 2 if kq % 8 == 0 else base * 100
                    base += NIC_IRQ_RATE * step
                counts.append(base % U32)
            seg = "".join(f"{v:10d} " for v in counts)
            pcc = ""
            if fresh_sysirq or (sysfs_irq and queue):
                by_cpu = dict(zip(online, counts))
                pcc = per_cpu_count(by_cpu.get(c, 0) for c in range(cpus))
        lines.append(f"{irq:>{prec}}: " + seg + f"{chip:>8}  {hw:<8}  {name}")
        if fresh_sysirq:
            d = f"{sysirq}/{irq}"
            os.makedirs(d, exist_ok=True)
            hwirq, flow = hw.split("-", 1)
            for f, text in (("per_cpu_count", pcc), ("actions", name + "\n"), ("chip_name", chip + "\n"),
                            ("hwirq", hwirq + "\n"), ("name", flow + "\n"), ("type", "edge\n"),
                            ("wakeup", "disabled\n")):
                _put(f"{d}/{f}", text)
        elif sysfs_irq and queue:
            _w(sysirq / str(irq) / "per_cpu_count", pcc)
    for label, text in (("NMI", "Non-maskable interrupts"), ("LOC", "Local timer interrupts"),
                        ("RES", "Rescheduling interrupts")):
        lines.append(f"{label:>{prec}}: " + "".join(f"{1000 * (c + 1) + 250 * step:10d} " for c in online) + f"  {text}")
    lines.append(f"{'ERR':>{prec}}: {0:10d}")
    lines.append(f"{'MIS':>{prec}}: {0:10d}")
    lines.append("")
    _w(dest / "proc/interrupts", "\n".join(lines))
    del lines

    # --- /proc/softirqs (possible CPUs, offline ones included, as the kernel prints)
    names = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
    sl = [" " * 20 + "".join(f"CPU{c:<8d}" for c in range(cpus)).rstrip()]
    for i, nm in enumerate(names):
        rate = {"NET_RX": NET_RX_RATE, "NET_TX": 2_000}.get(nm, 100)
        vals = [((c + 1) * 1000 * (i + 1) + (0 if c in off else rate * step)) % U32 for c in range(cpus)]
        sl.append(f"{nm:>12}:" + "".join(f" {v:10d}" for v in vals))
    _w(dest / "proc/softirqs", "\n".join(sl) + "\n")

    # --- /proc/stat (online CPUs; each second is 100 ticks: 10 sys, 5 irq, 15 softirq, 70 idle)
    st = []
    for c in online:
        b = 100_000 + c
        soft = _wave_ticks(step, c) if wave else 15 * step
        st.append(f"cpu{c} {b} 0 {b + 10 * step} {b * 7 + 85 * step - soft} 10 {b // 20 + 5 * step} "
                  f"{b // 7 + soft} 0 0 0")
    tot = [sum(int(x.split()[i]) for x in st) for i in range(1, 11)]
    intr = " ".join(str(rnd.randrange(1 << 30)) for _ in range(irq_numbers[-1] + 1))
    _w(dest / "proc/stat", "cpu  " + " ".join(map(str, tot)) + "\n" + "\n".join(st)
       + f"\nintr 123456789 {intr}\nctxt 987654\nbtime 1700000000\nprocesses 4242\n"
       "procs_running 3\nprocs_blocked 0\nsoftirq 1 2 3 4 5 6 7 8 9 10 11\n")

    # --- /proc/net/softnet_stat (15 columns, CPU id in column 13, offline CPUs absent)
    sn = []
    for c in online:
        processed = (c * 1_000_000 + NET_RX_RATE * 30 * step) % U32
        fields = [processed, 7 * step, 3 * step, 0, 0, 0, 0, 0, 0, (c * 10 + 500 * step) % U32, 0, 0, c, 0, 0]
        sn.append(" ".join(f"{v:08x}" for v in fields))
    _w(dest / "proc/net/softnet_stat", "\n".join(sn) + "\n")

    # --- /proc/irq/N for the NICs' IRQs
    for k, irq in enumerate(nic_irqs):
        d = dest / f"proc/irq/{irq}"
        if step and d.is_dir():
            continue  # nothing here changes with time
        cpu = queue_cpu[k]
        _w(d / "smp_affinity_list", f"{cpu}\n")
        _w(d / "smp_affinity", cpu_mask([cpu], cpus) + "\n")
        _w(d / "effective_affinity_list", f"{cpu}\n")
        _w(d / "affinity_hint", cpu_mask([cpu], cpus) + "\n")
        _w(d / "node", f"{_nic_node(k // queues, nnodes)}\n")

    # --- sysctls, identity
    core = dest / "proc/sys/net/core"
    for name, value in (("default_qdisc", "fq_codel"), ("rps_sock_flow_entries", "32768"),
                        ("netdev_max_backlog", "1000"), ("netdev_budget", "300"),
                        ("netdev_budget_usecs", "8000"), ("dev_weight", "64"),
                        ("rmem_max", "212992"), ("wmem_max", "212992"), ("rmem_default", "212992"),
                        ("wmem_default", "212992"), ("busy_poll", "0"), ("busy_read", "0")):
        _w(core / name, value + "\n")
    _w(dest / "proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
    _w(dest / "proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t4194304\n")
    _w(dest / "proc/sys/kernel/hostname", f"gen{cpus}\n")
    _w(dest / "proc/sys/kernel/osrelease", "6.1.0-generated-amd64\n")
    _w(dest / "sys/devices/system/cpu/online", cpu_list(online) + "\n")
    _w(dest / "sys/devices/system/cpu/offline", cpu_list(off) + "\n")
    _w(dest / "proc/uptime", f"{86400 + step}.00 {cpus * (86000 + step)}.00\n")
    _w(dest / "sys/devices/system/cpu/possible", f"0-{cpus - 1}\n")

    if nodes is not None:
        _w(dest / "sys/devices/system/node/online", f"0-{nnodes - 1}\n")
        _w(dest / "sys/devices/system/node/possible", f"0-{nnodes - 1}\n")
        for nd in range(nnodes):
            _w(dest / f"sys/devices/system/node/node{nd}/cpulist", cpu_list(_node_cpus(nd, nnodes, cpus)) + "\n")

    # --- the NICs in sysfs
    (dest / "sys/bus/pci/drivers/mlx5_core").mkdir(parents=True, exist_ok=True)
    for i, blk in enumerate(nic_blocks):
        bdf, node, ifname = _bdf(i), _nic_node(i, nnodes), f"eth{i}"
        pci = dest / f"sys/devices/pci0000:80/{bdf}"
        for irq in blk:
            _w(pci / f"msi_irqs/{irq}", "msix\n")
        _w(pci / "numa_node", f"{node}\n")
        local = (c for c in range(cpus) if c >= cpus // 2) if nodes is None else _node_cpus(node, nnodes, cpus)
        _w(pci / "local_cpulist", cpu_list(local) + "\n")
        _link(pci / "driver", "../../../bus/pci/drivers/mlx5_core")
        _netdev(dest, pci / f"net/{ifname}", ifname, 2 + i, queues, cpus, step, speed=100000, bdf=bdf)
        _link(dest / f"sys/class/net/{ifname}", f"../../devices/pci0000:80/{bdf}/net/{ifname}")
    lo = dest / "sys/devices/virtual/net/lo"
    _netdev(dest, lo, "lo", 1, 1, cpus, step, speed=None)
    _link(dest / "sys/class/net/lo", "../../devices/virtual/net/lo")
    return dest


def _nic_node(nic: int, nodes: int) -> int:
    return (1 + nic) % nodes  # eth0 on node 1, as before


def _node_cpus(node: int, nodes: int, cpus: int) -> list[int]:
    return [c for c in range(cpus) if c * nodes // cpus == node]


def _netdev(dest: Path, d: Path, name: str, ifindex: int, queues: int, cpus: int, step: int,
            speed: int | None, bdf: str = BDF) -> None:
    _w(d / "ifindex", f"{ifindex}\n")
    _w(d / "operstate", "up\n" if speed else "unknown\n")
    _w(d / "mtu", "1500\n" if speed else "65536\n")
    _w(d / "tx_queue_len", "1000\n")
    _w(d / "type", "1\n" if speed else "772\n")
    _w(d / "address", f"b8:59:9f:00:00:{ifindex - 1:02x}\n" if speed else "00:00:00:00:00:00\n")
    if speed:
        _w(d / "speed", f"{speed}\n")
        _link(d / "device", "../../../" + bdf)
    rx_b = 10**12 + LINK_RX_BYTES_RATE * step
    rx_p = 10**9 + LINK_RX_PKTS_RATE * step
    for f, v in (("rx_bytes", rx_b), ("tx_bytes", rx_b // 20), ("rx_packets", rx_p),
                 ("tx_packets", rx_p // 2), ("rx_errors", 0), ("tx_errors", 0),
                 ("rx_dropped", 11 * step), ("tx_dropped", 0), ("multicast", 5), ("collisions", 0)):
        _w(d / f"statistics/{f}", f"{v if speed else 1000 + step}\n")
    if step and (d / "queues").is_dir():
        return  # queue settings do not change with time
    for q in range(queues):
        rx, tx = d / f"queues/rx-{q}", d / f"queues/tx-{q}"
        _w(rx / "rps_cpus", cpu_mask([], cpus) + "\n")
        _w(rx / "rps_flow_cnt", "0\n")
        _w(tx / "xps_cpus", cpu_mask([q % cpus], cpus) + "\n")
        _w(tx / "xps_rxqs", cpu_mask([], queues) + "\n")  # a bitmap of rx queues (Linux 4.18+)
        _w(tx / "tx_maxrate", "0\n")
        bql = tx / "byte_queue_limits"
        for f, v in (("limit", 30280 + q), ("limit_max", 1879048192), ("limit_min", 0),
                     ("inflight", 0), ("hold_time", 1000)):
            _w(bql / f, f"{v}\n")


class FiringIrqs:
    """Raises each given per_cpu_count's count on its IRQ's own CPU (its largest field: a
    queue IRQ fires where its effective affinity points) by 20,000 a step, as a busy NIC's
    queue IRQs fire; a generated tree does not move by itself. Used by the benchmarks
    that measure the cost of counts that changed (sampler_cost, record_cost)."""

    def __init__(self, paths: Iterable[str], in_place: bool = False) -> None:
        self.in_place = in_place  # one write into the same inode, as sysfs regenerates it
        self.first: dict[str, list[str]] = {}
        for p in paths:
            with open(p) as f:
                self.first[p] = f.read().rstrip("\n").split(",")

    def step(self, k: int) -> None:
        """The counts k steps on from the first."""
        for p, parts in self.first.items():
            parts = list(parts)
            j = max(range(len(parts)), key=lambda i: int(parts[i]))
            parts[j] = str((int(parts[j]) + 20_000 * k) % (1 << 32))
            # whole (renamed over), as the kernel's file never reads torn: benchmarks/memory.py
            # advances the tree while nettop reads it, and a half-written count fell back to
            # reading the 185 MB /proc/interrupts of the 1,024-CPU tree
            if self.in_place:  # only for a reader in the same thread: it cannot read it torn
                fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
                try:
                    os.write(fd, (",".join(parts) + "\n").encode())
                finally:
                    os.close(fd)
            else:
                _w(Path(p), ",".join(parts) + "\n")

    def restore(self) -> None:
        """The files as they were."""
        for p, parts in self.first.items():
            _w(Path(p), ",".join(parts) + "\n")


def advance(dest: Path, every: float = 1.0, ticks: int | None = None, **kw: object) -> None:
    """Rewrite the tree's counters in place every `every` seconds, step 1, 2, 3...: a live
    host for `nettop --root DEST`, whose rates and heatmap (softirq share per CPU, `wave`)
    change each tick."""
    step = 0
    next_t = time.monotonic()
    while ticks is None or step < ticks:
        step += 1
        generate_tree(dest, step=step, wave=True, **kw)  # type: ignore[arg-type]
        next_t += every
        time.sleep(max(0.0, next_t - time.monotonic()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--cpus", type=int, default=256)
    ap.add_argument("--irqs", type=int, default=4096)
    ap.add_argument("--queues", type=int, default=64)
    ap.add_argument("--offline", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    ap.add_argument("--nics", type=int, default=1)
    ap.add_argument("--nodes", type=int, default=None)
    ap.add_argument("--sparse", action="store_true", help="each IRQ counts on its own CPU only")
    ap.add_argument("--no-sysfs-irq", dest="sysfs_irq", action="store_false",
                    help="leave /sys/kernel/irq out (an old kernel, or a capture without it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step", type=int, default=0)
    ap.add_argument("--advance", type=float, metavar="SECONDS",
                    help="keep running: advance every counter each SECONDS (atomic rewrites), until killed")
    a = ap.parse_args()
    kw = dict(cpus=a.cpus, irqs=a.irqs, queues=a.queues, offline=a.offline, seed=a.seed, nics=a.nics,
              nodes=a.nodes, sparse=a.sparse, sysfs_irq=a.sysfs_irq)
    generate_tree(a.dest, step=a.step, **kw)  # type: ignore[arg-type]
    if a.advance:
        advance(a.dest, a.advance, **kw)


if __name__ == "__main__":
    main()
