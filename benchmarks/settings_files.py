"""Cost of one queue/IRQ settings file: full path against a held directory fd.

The settings rotation reads ~6,100 small files at 1,024 CPUs (RPS/XPS/BQL under
/sys/class/net/IF/queues, IRQ affinity under /proc/irq/N). Each open of a full path walks
every component, and /sys/class/net/IF is a symlink into /sys/devices/...; an open relative
to a held fd of the interface's `queues` directory (or of /proc/irq) walks only the last
two or three. This prints the CPU per file (open + read + close, µs, median of the rounds)
both ways, on the real sysfs of a veth with 128 rx and 128 tx queues made for the purpose
(in a fresh namespace, removed afterwards) and on /proc/irq of this host, plus the cost of
the same files through `SysRoot.read_line` for reference. Needs root.

    .venv/bin/python benchmarks/settings_files.py [--rounds 7]
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

from nettop.kernel.sysroot import LIVE  # noqa: E402
import lab  # noqa: E402  (tests/lab.py)

FLAGS = os.O_RDONLY | os.O_CLOEXEC


def per_file_full(paths: list[str]) -> float:
    t = time.thread_time()
    for p in paths:
        fd = os.open(p, FLAGS)
        os.read(fd, 4096)
        os.close(fd)
    return (time.thread_time() - t) / len(paths)


def per_file_at(dir_fd: int, names: list[str]) -> float:
    t = time.thread_time()
    for n in names:
        fd = os.open(n, FLAGS, dir_fd=dir_fd)
        os.read(fd, 4096)
        os.close(fd)
    return (time.thread_time() - t) / len(names)


def per_file_layers(rels: list[str]) -> float:
    t = time.thread_time()
    for r in rels:
        LIVE.read_line(r)
    return (time.thread_time() - t) / len(rels)


def compare(label: str, dir_path: str, names: list[str], rounds: int) -> None:
    full = [f"{dir_path}/{n}" for n in names]
    rels = [p.lstrip("/") for p in full]
    dir_fd = os.open(dir_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        a, b, c = [], [], []
        for _ in range(rounds):  # alternating, so drift in the machine's load hits all three
            a.append(per_file_full(full))
            b.append(per_file_at(dir_fd, names))
            c.append(per_file_layers(rels))
    finally:
        os.close(dir_fd)
    fa, fb, fc = (statistics.median(x) * 1e6 for x in (a, b, c))
    print(f"{label} ({len(names)} files, e.g. {full[0]}):")
    print(f"  full path, os.open/read/close      : {fa:6.2f} µs per file")
    print(f"  dir_fd of {dir_path.rsplit('/', 1)[-1]!r:>10}, os.open at: {fb:6.2f} µs per file ({(fa - fb) / fa:+.0%} saved)")
    print(f"  full path through SysRoot.read_line: {fc:6.2f} µs per file")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
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
