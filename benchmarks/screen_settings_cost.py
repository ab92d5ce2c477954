"""What the live view's read costs with the queue rows it draws, against every queue shown.

On the generated 1,024-CPU / 16,384-IRQ / 4x128-queue tree of benchmarks/record_cost.py
(counters advanced before each tick by its `Advancer`, outside the measured time), three
HostReaders take turns, one tick each, their clocks stepped 1 s a tick:
  - "whole":   all four NICs on screen and every queue of them (the live view before:
               every tick 512 queues' RPS/XPS/BQL files and 512 IRQs' affinity)
  - "drawn":   all four NICs on screen, ROWS combined queue rows drawn (what a 120x40
               queue table and BQL table show), the rest in rotation
  - "none":    nothing on screen, everything in rotation (the floor of this policy)
Prints each one's median CPU per tick (thread time of HostReader.read) and settings
files read per tick (mean). Ticks alternate, so the machine's load falls on all three.

    .venv/bin/python benchmarks/screen_settings_cost.py [--ticks 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.kernel.sysroot import SysRoot  # noqa: E402
from record_cost import SIZES, Advancer  # noqa: E402
from stepped_clock import SteppedClock  # noqa: E402  (tests/stepped_clock.py)

ROWS = 20  # queue rows drawn: a 120x40 queue table's, with the BQL table's beside them


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--keep", help="generate the tree here and keep it (re-used when present)")
    args = ap.parse_args()
    from treegen import generate_tree  # tests/treegen.py

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nettop-screenbench-"))
    dest = base / "tree1024"
    if not (dest / "proc/stat").exists():
        t = time.monotonic()
        generate_tree(dest, **SIZES[1024])  # type: ignore[arg-type]
        print(f"(generated the 1,024-CPU tree in {time.monotonic() - t:.0f} s: {dest})")
    root = SysRoot(str(dest))
    readers = {case: HostReader(root, clock=SteppedClock(1.0)) for case in ("whole", "drawn", "none")}
    try:
        first = readers["whole"].read()
        nics = sorted(n for n in first.links if n != "lo")
        rows = [(n, (q.kind, q.index)) for n in nics for q in first.queue_maps[n].queues][:ROWS]
        readers["whole"].on_screen = readers["drawn"].on_screen = frozenset(nics)
        readers["drawn"].screen_queues = {n: frozenset(q for m, q in rows if m == n) for n in nics}
        readers["none"].on_screen = frozenset()
        for case in ("drawn", "none"):
            readers[case].read()
        adv = Advancer(dest, list(readers["whole"]._irq_sysfs._paths.values()))
        cpu: dict[str, list[float]] = {c: [] for c in readers}
        files: dict[str, list[int]] = {c: [] for c in readers}
        for k in range(1, args.ticks + 1):
            adv.step(k)
            for case, reader in readers.items():
                t = time.thread_time()
                reader.read()
                cpu[case].append(time.thread_time() - t)
                files[case].append(reader.settings_files)
    finally:
        for r in readers.values():
            r.close()
    print(f"HostReader.read() at 1,024 CPUs, 4 x 128 queues on screen, {args.ticks} ticks at 1 s each, alternating:")
    for case, label in (("whole", "every queue of the 4 NICs"), ("drawn", f"{ROWS} rows drawn, rest rotating"),
                        ("none", "nothing on screen")):
        print(f"  {label:32s}: {statistics.median(cpu[case]) * 1000:7.1f} ms a tick (median), "
              f"{statistics.mean(files[case]):7.1f} settings files a tick (mean)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
