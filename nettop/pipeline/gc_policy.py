"""The garbage collector's pace for nettop's long runs (the live view, `record`, `serve`).

Each tick makes tens of thousands of short-lived objects on a big host (a 1,024-CPU
snapshot's rows, the rates, the frame), nearly all freed by reference counting within
the tick. With CPython's default first threshold (700 allocations) the collector runs
dozens of young collections a tick, and the survivors they promote make a full
collection (~100 ms over the whole heap at 1,024 CPUs) several times a minute: ~2 % of
a CPU in the live view there, a quarter of its budget. A first threshold of 10,000
lets the tick's garbage die before a young collection sees it; cycles are still
collected, a few ticks later at most. Measured with benchmarks/memory.py
(docs/collectors.md)."""

from __future__ import annotations

import gc

YOUNG = 10_000  # allocations less deallocations between young collections (CPython: 700)


def for_long_runs() -> None:
    """Set the collector's thresholds for a process that samples until stopped. Keeps
    the older generations' factors; a threshold already raised (by an embedder) stays."""
    first, second, third = gc.get_threshold()
    if 0 < first < YOUNG:
        gc.set_threshold(YOUNG, second, third)
