"""The doctor's cost per tick on the generated 256-CPU / 4096-IRQ / 64-queue tree.

Per tick the live view and the recorder call `Watch.observe(point)`: a Window over the
last 5 s and all 16 rules. Measured here as thread CPU time, median of N ticks, over a
timeline of real snapshots read from treegen trees one second apart (the tree's
counters advance at fixed rates, so its softnet-drops, time-squeeze and numa-locality
findings are live on every tick and the rules do their full work). Peers measured in
the same run: `compute_rates` (what the timeline already spends per tick on the same
pair) and `HostReader.read` (the sampler's tick). Target: <= 2 ms per tick.

Usage: .venv/bin/python benchmarks/doctor_cost.py [--ticks N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from treegen import generate_tree  # noqa: E402

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.doctor.watch import Watch  # noqa: E402
from nettop.kernel.sysroot import SysRoot  # noqa: E402
from nettop.model.rates import compute_rates  # noqa: E402
from nettop.model.timeline import Point  # noqa: E402

TARGET_MS = 2.0


def cpu_ms(fn, n: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(median, max) thread CPU ms of n calls of fn(i)."""
    times = []
    for i in range(n):
        t = time.thread_time()
        fn(i)
        times.append((time.thread_time() - t) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=60)
    ap.add_argument("--keep", default=None, help="generate the trees here (else a temporary directory)")
    a = ap.parse_args()
    base = Path(a.keep or tempfile.mkdtemp(prefix="doctor-cost."))
    steps = 6  # a 5 s window needs six samples a second apart
    trees = [generate_tree(base / f"t{k}", step=k) for k in range(steps)]
    snaps = []
    readers = [HostReader(SysRoot(str(t))) for t in trees]
    read_ms, _ = cpu_ms(lambda i: readers[i % steps].read(), max(6, a.ticks // 6))
    for k, r in enumerate(readers):
        s = r.read()
        snaps.append(dataclasses.replace(s, t_mono=1000.0 + k, t_wall=1.7e9 + k))
        r.close()
    cpus = len(snaps[0].online_cpus)
    irqs = len(snaps[0].interrupts.irqs)

    rates_ms, _ = cpu_ms(lambda i: compute_rates(snaps[i % (steps - 1)], snaps[i % (steps - 1) + 1]), a.ticks)

    # the Watch as the live source drives it: five points of the window held, the sixth
    # arrives; each tick starts from the same five so every tick does the same full work
    points = [Point(sn, None) for sn in snaps]
    watch = Watch()
    for p in points:
        watch.observe(p)
    found = sorted(f.id for f in watch.findings)

    def tick(i: int) -> None:
        watch._points = collections.deque(points[:-1], maxlen=120)  # noqa: SLF001 - O(5)
        watch.observe(points[-1])

    doctor_ms, doctor_max = cpu_ms(tick, a.ticks)

    print(f"doctor cost per tick, generated tree: {cpus} CPUs, {irqs} IRQs, 64 queues, 5 s window, "
          f"{a.ticks} ticks (thread CPU time, median)")
    print(f"  findings on this tree: {', '.join(found)}")
    print(f"  {'what':<34}{'ms/tick':>10}")
    print(f"  {'doctor (Watch.observe, 16 rules)':<34}{doctor_ms:>10.3f}   (max {doctor_max:.3f})")
    print(f"  {'peer: compute_rates (same pair)':<34}{rates_ms:>10.3f}")
    print(f"  {'peer: HostReader.read (the tick)':<34}{read_ms:>10.3f}")
    print(f"  target <= {TARGET_MS:g} ms: {'met' if doctor_ms <= TARGET_MS else 'NOT met'}")


if __name__ == "__main__":
    main()
