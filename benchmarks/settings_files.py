"""Cost of one queue/IRQ settings file: full path against a held directory fd.

The settings rotation reads ~6,100 small files at 1,024 CPUs (RPS/XPS/BQL under
/sys/class/net/IF/queues, IRQ affinity under /proc/irq/N). Each open of a full path walks
every component, and /sys/class/net/IF is a symlink into /sys/devices/...; an open relative
to a held fd of the interface's `queues` directory (or of /proc/irq) walks only the last
two or three. This prints the CPU per file (open + read + close, µs, median of the rounds)
both ways, on the real sysfs of a veth with 128 rx and 128 tx queues made for the purpose
(in a fresh namespace, removed afterwards) and on /proc/irq of this host, plus the cost of
the same files through `SysRoot.read_line` for reference. Needs root.

With `--tree DIR` (a generated tree, tests/treegen.py), the same on the tree's first
NIC's queues and its /proc/irq, where the root's own path adds to every full path, and
the settings rotation's CPU per tick inside HostReader ticks at 1 s (`SettingsRotation.read`,
median of 40 ticks after 3), per settings file it read (its own bookkeeping included).

    .venv/bin/python benchmarks/settings_files.py [--rounds 7] [--tree DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from nettop.kernel.sysroot import LIVE, SysRoot  # noqa: E402
import lab  # noqa: E402  (tests/lab.py)

FLAGS = os.O_RDONLY | os.O_CLOEXEC


def per_file(paths: list[str], dir_fd: int | None = None) -> float:
    """CPU seconds per open+read+close of each path (relative to `dir_fd` when given)."""
    t = time.thread_time()
    for p in paths:
        fd = os.open(p, FLAGS, dir_fd=dir_fd)
        os.read(fd, 4096)
        os.close(fd)
    return (time.thread_time() - t) / len(paths)


def per_file_layers(root: SysRoot, rels: list[str]) -> float:
    t = time.thread_time()
    for r in rels:
        root.read_line(r)
    return (time.thread_time() - t) / len(rels)


def compare(label: str, dir_path: str, names: list[str], rounds: int, root: SysRoot = LIVE) -> None:
    full = [f"{dir_path}/{n}" for n in names]
    rels = [p[len(root.path):].lstrip("/") for p in full]
    dir_fd = os.open(dir_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        a, b, c = [], [], []
        for _ in range(rounds):  # alternating, so drift in the machine's load hits all three
            a.append(per_file(full))
            b.append(per_file(names, dir_fd))
            c.append(per_file_layers(root, rels))
    finally:
        os.close(dir_fd)
    fa, fb, fc = (statistics.median(x) * 1e6 for x in (a, b, c))
    print(f"{label} ({len(names)} files, e.g. {full[0]}):")
    print(f"  full path, os.open/read/close      : {fa:6.2f} µs per file")
    print(f"  dir_fd of {dir_path.rsplit('/', 1)[-1]!r:>10}, os.open at: {fb:6.2f} µs per file ({(fa - fb) / fa:+.0%} saved)")
    print(f"  full path through SysRoot.read_line: {fc:6.2f} µs per file")


def rotation_cost(root: SysRoot, ticks: int = 40) -> None:
    from nettop.collectors.host import HostReader
    from stepped_clock import SteppedClock  # tests/stepped_clock.py

    got: list[tuple[float, int]] = []
    with HostReader(root, clock=SteppedClock(1.0)) as reader:
        rot = reader._settings
        real = rot.read

        def timed(*a, **kw):  # type: ignore[no-untyped-def]
            t = time.thread_time()
            out = real(*a, **kw)
            got.append((time.thread_time() - t, out.files))
            return out

        rot.read = timed
        for _ in range(3):
            reader.read()
        got.clear()
        for _ in range(ticks):
            reader.read()
    ms = statistics.median(c for c, _ in got) * 1e3
    files = statistics.mean(f for _, f in got)
    print(f"settings rotation in HostReader ticks at 1 s: {ms:.2f} ms a tick (median of {ticks}), "
          f"{files:.0f} files a tick, {ms * 1e3 / files:.1f} µs per file")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tree", help="also a generated tree's first NIC and /proc/irq")
    args = ap.parse_args()
    if args.tree:
        root = SysRoot(os.path.abspath(args.tree))
        nic = sorted(n for n in os.listdir(root.join("sys/class/net")) if n != "lo")[0]
        qdir = root.join(f"sys/class/net/{nic}/queues")
        names = [f"{q}/{f}" for q in sorted(os.listdir(qdir)) for f in
                 ("rps_cpus", "rps_flow_cnt", "xps_cpus", "xps_rxqs", "byte_queue_limits/limit",
                  "byte_queue_limits/limit_max", "byte_queue_limits/limit_min", "byte_queue_limits/inflight")
                 if os.path.exists(f"{qdir}/{q}/{f}")]
        compare(f"tree {args.tree}, {nic}", qdir, names, args.rounds, root)
        irqdir = root.join("proc/irq")
        names = [f"{i}/{f}" for i in sorted(os.listdir(irqdir))[:256] for f in
                 ("smp_affinity_list", "effective_affinity_list", "affinity_hint", "node")
                 if os.path.exists(f"{irqdir}/{i}/{f}")]
        compare(f"tree {args.tree}, /proc/irq", irqdir, names, args.rounds, root)
        rotation_cost(root)
    with lab.veth_lab(queues=128) as veth:
        qdir = f"/sys/class/net/{veth.host_if}/queues"
        names = [f"rx-{i}/{f}" for i in range(128) for f in ("rps_cpus", "rps_flow_cnt")]
        names += [f"tx-{i}/{f}" for i in range(128) for f in ("xps_cpus", "xps_rxqs")]
        names += [f"tx-{i}/byte_queue_limits/{f}" for i in range(128)
                  for f in ("limit", "limit_max", "limit_min", "inflight")]
        names = [n for n in names if os.path.exists(f"{qdir}/{n}")]
        compare(f"veth {veth.host_if}, 128+128 queues", qdir, names, args.rounds)
    irqs = sorted(int(n) for n in os.listdir("/proc/irq") if n.isdigit()
                  and os.path.exists(f"/proc/irq/{n}/smp_affinity_list"))
    names = [f"{i}/{f}" for i in irqs for f in ("smp_affinity_list", "effective_affinity_list",
                                                  "affinity_hint", "node")
             if os.path.exists(f"/proc/irq/{i}/{f}")]
    compare(f"/proc/irq, {len(irqs)} IRQs", "/proc/irq", names, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
