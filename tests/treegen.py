"""Generate a faithful /proc + /sys tree of a big host, for tests and benchmarks.

    python tests/treegen.py DEST --cpus 256 --irqs 4096 --queues 64 [--step 1]

The host has `cpus` CPUs (some may be offline), `irqs` IRQs of which `queues` serve the
combined channels of an mlx5 NIC `eth0` at 0000:81:00.0 (NUMA node 1), the rest a mix of
other devices. Files use the kernel's exact formats (column widths of /proc/interrupts
and /proc/softirqs, 15-column softnet_stat with the CPU id, sysfs one-value files,
relative symlinks). `step=k` gives the same host k seconds later: every counter advanced
at a fixed per-second rate, 32-bit counters wrapping as they do in the kernel.
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


def generate_tree(dest: Path, cpus: int = 256, irqs: int = 4096, queues: int = 64,
                  offline: Iterable[int] = (), seed: int = 0, step: int = 0, wave: bool = False) -> Path:
    """The tree at second `step`; with `wave`, each CPU's softirq share changes every
    second (else a steady 15 %)."""
    dest = Path(dest)
    rnd = random.Random(seed)
    off = set(offline)
    online = [c for c in range(cpus) if c not in off]
    first_irq = 24
    irq_numbers = list(range(first_irq, first_irq + irqs))
    nic_irqs = irq_numbers[:queues]
    queue_cpu = {q: online[q % len(online)] for q in range(queues)}

    # --- /proc/interrupts: "%*d: " + "%10u " per online CPU + chip, hwirq, name
    prec = max(3, len(str(irq_numbers[-1])))
    lines = [" " * (prec + 2) + "".join(f"CPU{c:<8d}" for c in online).rstrip()]
    for k, irq in enumerate(irq_numbers):
        counts = []
        if k < queues:
            chip, hw, name = f"PCI-MSIX-{BDF}", f"{k + 1}-edge", f"mlx5_comp{k}@pci:{BDF}"
        elif k == queues:
            chip, hw, name = f"PCI-MSIX-{BDF}", "0-edge", f"mlx5_async0@pci:{BDF}"
        else:
            dev = (k - queues) % 64
            chip, hw, name = f"PCI-MSIX-0000:{dev + 1:02x}:00.0", f"{k % 32}-edge", f"nvme{dev}q{k % 32}"
        for c in online:
            base = rnd.randrange(0, 1 << 20)
            if k < queues and c == queue_cpu[k]:
                # one queue in eight sits just under 2^32 so that step 1 wraps it
                base = U32 - NIC_IRQ_RATE // 2 if k % 8 == 0 else base * 100
                base += NIC_IRQ_RATE * step
            counts.append(base % U32)
        lines.append(f"{irq:>{prec}}: " + "".join(f"{n:10d} " for n in counts) + f"{chip:>8}  {hw:<8}  {name}")
    for label, text in (("NMI", "Non-maskable interrupts"), ("LOC", "Local timer interrupts"),
                        ("RES", "Rescheduling interrupts")):
        lines.append(f"{label:>{prec}}: " + "".join(f"{1000 * (c + 1) + 250 * step:10d} " for c in online) + f"  {text}")
    lines.append(f"{'ERR':>{prec}}: {0:10d}")
    lines.append(f"{'MIS':>{prec}}: {0:10d}")
    _w(dest / "proc/interrupts", "\n".join(lines) + "\n")

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

    # --- /proc/irq/N for the NIC's IRQs
    for k, irq in enumerate(nic_irqs):
        d = dest / f"proc/irq/{irq}"
        cpu = queue_cpu[k]
        _w(d / "smp_affinity_list", f"{cpu}\n")
        _w(d / "smp_affinity", cpu_mask([cpu], cpus) + "\n")
        _w(d / "effective_affinity_list", f"{cpu}\n")
        _w(d / "affinity_hint", cpu_mask([cpu], cpus) + "\n")
        _w(d / "node", "1\n")

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

    # --- the NIC in sysfs
    pci = dest / f"sys/devices/pci0000:80/{BDF}"
    for irq in nic_irqs + [irq_numbers[queues]]:
        _w(pci / f"msi_irqs/{irq}", "msix\n")
    _w(pci / "numa_node", "1\n")
    _w(pci / "local_cpulist", cpu_list(c for c in range(cpus) if c >= cpus // 2) + "\n")
    (dest / "sys/bus/pci/drivers/mlx5_core").mkdir(parents=True, exist_ok=True)
    _link(pci / "driver", "../../../bus/pci/drivers/mlx5_core")
    _netdev(dest, pci / "net/eth0", "eth0", 2, queues, cpus, step, speed=100000)
    _link(dest / "sys/class/net/eth0", f"../../devices/pci0000:80/{BDF}/net/eth0")
    lo = dest / "sys/devices/virtual/net/lo"
    _netdev(dest, lo, "lo", 1, 1, cpus, step, speed=None)
    _link(dest / "sys/class/net/lo", "../../devices/virtual/net/lo")
    return dest


def _netdev(dest: Path, d: Path, name: str, ifindex: int, queues: int, cpus: int, step: int,
            speed: int | None) -> None:
    _w(d / "ifindex", f"{ifindex}\n")
    _w(d / "operstate", "up\n" if speed else "unknown\n")
    _w(d / "mtu", "1500\n" if speed else "65536\n")
    _w(d / "tx_queue_len", "1000\n")
    _w(d / "type", "1\n" if speed else "772\n")
    _w(d / "address", "b8:59:9f:00:00:01\n" if speed else "00:00:00:00:00:00\n")
    if speed:
        _w(d / "speed", f"{speed}\n")
        _link(d / "device", "../../../" + BDF)
    rx_b = 10**12 + LINK_RX_BYTES_RATE * step
    rx_p = 10**9 + LINK_RX_PKTS_RATE * step
    for f, v in (("rx_bytes", rx_b), ("tx_bytes", rx_b // 20), ("rx_packets", rx_p),
                 ("tx_packets", rx_p // 2), ("rx_errors", 0), ("tx_errors", 0),
                 ("rx_dropped", 11 * step), ("tx_dropped", 0), ("multicast", 5), ("collisions", 0)):
        _w(d / f"statistics/{f}", f"{v if speed else 1000 + step}\n")
    for q in range(queues):
        rx, tx = d / f"queues/rx-{q}", d / f"queues/tx-{q}"
        _w(rx / "rps_cpus", cpu_mask([], cpus) + "\n")
        _w(rx / "rps_flow_cnt", "0\n")
        _w(tx / "xps_cpus", cpu_mask([q % cpus], cpus) + "\n")
        _w(tx / "tx_maxrate", "0\n")
        bql = tx / "byte_queue_limits"
        for f, v in (("limit", 30280 + q), ("limit_max", 1879048192), ("limit_min", 0),
                     ("inflight", 0), ("hold_time", 1000)):
            _w(bql / f, f"{v}\n")


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
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step", type=int, default=0)
    ap.add_argument("--advance", type=float, metavar="SECONDS",
                    help="keep running: advance every counter each SECONDS (atomic rewrites), until killed")
    a = ap.parse_args()
    generate_tree(a.dest, a.cpus, a.irqs, a.queues, a.offline, a.seed, a.step)
    if a.advance:
        advance(a.dest, a.advance, cpus=a.cpus, irqs=a.irqs, queues=a.queues, offline=a.offline, seed=a.seed)


if __name__ == "__main__":
    main()
