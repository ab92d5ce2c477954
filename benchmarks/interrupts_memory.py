"""The /proc/interrupts fallback's peak memory and time per read on a big host.

Without /sys/kernel/irq (old kernels, captured trees) HostReader reads every IRQ's
counts from /proc/interrupts, which at 1,024 CPUs x 16,384 IRQs is ~185 MB. On the
generated tree of that size (tests/treegen.py, `--no-sysfs-irq`), a fresh process per
checkout does `--reads` full parses and then `--reads` fast-path reads of
InterruptReader with HostReader's choice of IRQs (the NICs'), and prints beside the
file size:
  - the process's peak RSS (ru_maxrss) and what it was after the imports,
  - the tracemalloc peak of one full and one fast read (a separate pass: tracing slows
    the reads down; the fast read's includes the table the reader keeps from the full),
  - the median CPU time (thread time: the read system calls included) of a full and of
    a fast read,
  - and, in another fresh process, the peak RSS of `--reads` whole HostReader.read()
    ticks on that tree (the sampler of the live view and `nettop record`).
Target (issue 29): the live view at 1,024 CPUs <= 400 MB, so the fallback's own peak
must be far below that and not grow with the file.

    .venv/bin/python benchmarks/interrupts_memory.py [--tree DIR] [--reads 5]
        [--src DIR ...]   (other checkouts' nettop, e.g. an export of the last commit,
                           measured in the same run for a before/after)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# record_cost's 1,024-CPU tree, without /sys/kernel/irq
TREEGEN = ["--cpus", "1024", "--irqs", "16384", "--queues", "128", "--nics", "4", "--nodes", "4", "--sparse",
           "--no-sysfs-irq"]


def sampler_child(tree: str, reads: int) -> dict[str, float]:
    from nettop.collectors.host import HostReader
    from nettop.kernel.sysroot import SysRoot

    with HostReader(SysRoot(tree)) as reader:
        for _ in range(reads):
            snap = reader.read()
    assert snap.irq_source == "/proc/interrupts", snap.irq_source
    return {"sampler_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(tree: str, reads: int) -> dict[str, float]:
    """Measured in a process of its own, so that ru_maxrss is this checkout's alone."""
    import tracemalloc

    from nettop.collectors.host import _NET_IRQ_NAME
    from nettop.collectors.interrupts import InterruptReader
    from nettop.kernel.sysroot import SysRoot

    def want(irq: int, name: str) -> bool:
        return bool(_NET_IRQ_NAME.search(name))

    root = SysRoot(tree)
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reader = InterruptReader(full_every=1 << 30)
    full, fast = [], []
    for _ in range(reads):
        t = time.thread_time()
        table, problems = reader.read(root, want, full=True)
        full.append(time.thread_time() - t)
        assert not problems and table.irqs, problems
    for _ in range(reads):
        t = time.thread_time()
        reader.read(root, want)
        fast.append(time.thread_time() - t)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    counted = sum(irq.counts is not None for irq in table.irqs.values())
    del table
    reader = InterruptReader(full_every=1 << 30)
    tracemalloc.start()
    reader.read(root, want, full=True)
    traced_full = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    reader.read(root, want)
    traced_fast = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"base_mb": base_kb / 1024, "peak_mb": peak_kb / 1024, "traced_full_mb": traced_full / 2**20,
            "traced_fast_mb": traced_fast / 2**20, "full_ms": statistics.median(full) * 1000,
            "fast_ms": statistics.median(fast) * 1000, "counted": counted}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", help="an existing tree without /sys/kernel/irq (else one is generated)")
    ap.add_argument("--keep", help="generate the tree here and keep it")
    ap.add_argument("--reads", type=int, default=5)
    ap.add_argument("--src", action="append", default=[], help="a checkout to measure (default: this one)")
    ap.add_argument("--child", choices=["reader", "sampler"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps((child if args.child == "reader" else sampler_child)(args.tree, args.reads)))
        return 0

    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        tree = Path(args.tree or args.keep or Path(tmp) / "host1024-nosysfs")
        if not args.tree:
            # in a process of its own: ru_maxrss survives fork and exec, so a parent that had
            # held the tree's text would lend its peak to every child measured after it
            subprocess.run([sys.executable, str(HERE.parent / "tests/treegen.py"), str(tree), *TREEGEN],
                           check=True)
        size = (tree / "proc/interrupts").stat().st_size
        print(f"/proc/interrupts of {tree}: {size / 1e6:.1f} MB = {size / 2**20:.1f} MiB "
              f"({args.reads} full and {args.reads} fast reads per checkout)")
        for src in args.src or [str(HERE.parent)]:
            r = {}
            for what in ("reader", "sampler"):
                out = subprocess.run([sys.executable, __file__, "--child", what, "--tree", str(tree),
                                      "--reads", str(args.reads)], env=dict(os.environ, PYTHONPATH=src),
                                     cwd=src, check=True, capture_output=True, text=True).stdout
                r.update(json.loads(out))
            print(f"  {src}:\n"
                  f"    InterruptReader: peak RSS {r['peak_mb']:6.1f} MiB (imports {r['base_mb']:.1f} MiB);  "
                  f"traced peak full {r['traced_full_mb']:6.1f} MiB, fast {r['traced_fast_mb']:6.1f} MiB;  "
                  f"CPU per full read {r['full_ms']:6.1f} ms, fast {r['fast_ms']:6.1f} ms  ({r['counted']} IRQs counted)\n"
                  f"    HostReader.read(): peak RSS {r['sampler_peak_mb']:6.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
