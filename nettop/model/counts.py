"""The followed IRQs' per-CPU counts of one tick as one matrix.

A 1,024-CPU host with 4 NICs of 128 queues has ~520 followed IRQs of 1,024 counts each:
~530,000 numbers a tick. Held as a tuple per IRQ, the rates and the doctor walked each
one in Python (~20-35 us per IRQ per operation, ~50 ms a tick in all). The sysfs reader
now fills one unsigned 32-bit matrix per tick (a row per IRQ, a column per online CPU),
and each `Irq.counts` is a `CountRow`: a read-only view of its row that still reads as
the sequence of ints it was, so every consumer of a tuple (the JSON, serve, the codec,
recordings' decoded tuples) keeps working, and those that can take the whole table at
once (`model/rates.py`, the doctor's `Window`) subtract two matrices in one step.

32 bits is the kernel's width: `kstat_irqs_cpu()` is an `unsigned int`, and the sysfs
reader refuses a value outside it (it falls back to /proc/interrupts).
"""

from __future__ import annotations

import os
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, overload

from nettop.model.snapshot import InterruptTable

if TYPE_CHECKING:
    import numpy as np

DTYPE = "uint32"


def numpy() -> ModuleType:
    """numpy, imported on first use: only a reader that builds a count matrix needs it
    (~90 ms and ~17 MB), so `nettop set`, `replay` of a small host, `report` never pay.

    Its OpenBLAS would start a thread per CPU (up to 64) for matrix products nettop never
    computes; idle, but each one a thread the kernel may hand a SIGHUP to (hangups.py).
    One is asked for, unless the user's environment says otherwise."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np

    return np


class CountMatrix:
    """`values[i]` are the counts of IRQ `irqs[i]` on each online CPU (the table's `cpus`)."""

    __slots__ = ("irqs", "values", "sums", "_index")

    def __init__(self, irqs: tuple[int, ...], values: np.ndarray, sums: list[int] | None = None) -> None:
        if values.ndim != 2 or values.shape[0] != len(irqs):
            raise ValueError("a count matrix has one row per IRQ")
        if sums is not None and len(sums) != len(irqs):
            raise ValueError("a count matrix's row sums are one per IRQ")
        values.flags.writeable = False  # a snapshot's counts never change
        self.irqs = irqs
        self.values = values
        # each row's sum as a Python int, when its maker knows them (the sysfs reader
        # keeps them as it reads, for the IRQs' totals): the recorder stores each total
        # as its difference from the row's sum, and summing 1,024 x 516 counts again
        # was ~0.3 ms a sample
        self.sums = sums
        self._index: dict[int, int] | None = None

    def row_sums(self) -> list[int]:
        """Each row's sum (exact: unsigned 64-bit, far above 1,024 x 2**32)."""
        if self.sums is None:
            self.sums = self.values.sum(axis=1, dtype="u8").tolist()
        return self.sums

    def index(self, irq: int) -> int | None:
        """The row of `irq`, or None."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.irqs)}
        return self._index.get(irq)

    def rows_of(self, irqs: Iterable[int]) -> list[int | None]:
        """`index` of each of `irqs` (a NIC's queue IRQs in one C-level pass)."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.irqs)}
        return list(map(self._index.get, irqs))

    def same_layout(self, other: CountMatrix) -> bool:
        """Same IRQs in the same rows and as many columns: rows can be subtracted."""
        return self.irqs == other.irqs and self.values.shape == other.values.shape


class MatrixIrqs(dict):  # dict[int, Irq]
    """A snapshot's counted IRQs (number -> Irq), every one's counts a row of `matrix` in
    this order, as the sysfs reader makes them: `table_matrix` then takes the matrix as
    it is, where it would otherwise walk every IRQ to find that out (~0.3 ms a tick at
    1,024 CPUs). A plain dict in every other way; a copy of it is a plain dict."""

    __slots__ = ("matrix",)

    def __init__(self, pairs: Iterable[tuple[int, Any]], matrix: CountMatrix) -> None:
        super().__init__(pairs)
        self.matrix = matrix

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def copy(self) -> dict:
        return dict(self)


class CountRow(Sequence[int]):
    """One IRQ's counts: a row of a `CountMatrix` that reads as a tuple of ints (equal to
    the tuple of the same counts, hashable like it)."""

    __slots__ = ("matrix", "i")

    def __init__(self, matrix: CountMatrix, i: int) -> None:
        self.matrix = matrix
        self.i = i

    @property
    def array(self) -> np.ndarray:
        return self.matrix.values[self.i]

    def __len__(self) -> int:
        return int(self.matrix.values.shape[1])

    @overload
    def __getitem__(self, k: int) -> int: ...

    @overload
    def __getitem__(self, k: slice) -> tuple[int, ...]: ...

    def __getitem__(self, k: int | slice) -> int | tuple[int, ...]:
        if isinstance(k, slice):
            return tuple(self.array[k].tolist())
        return int(self.array[k])

    def __iter__(self) -> Iterator[int]:
        return iter(self.array.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CountRow):
            return other is self or self.array.tolist() == other.array.tolist()
        if isinstance(other, (tuple, list)):
            return self.array.tolist() == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self.array.tolist()))

    def __repr__(self) -> str:
        return f"CountRow({tuple(self.array.tolist())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self.array.tolist()),))


# The matrix of the last few tables asked for (by identity; the table is held so its id
# cannot be reused): a tick's rates ask for the two newest snapshots' and the doctor's
# window for its first and last, so each snapshot's ~520 IRQs are walked once, not four
# times. A snapshot's table never changes after its read, so a kept answer stays right.
# Few are kept: each holds its matrix (2 MB at 1,024 CPUs) beyond the life of its snapshot.
_KEEP = 8
_kept: dict[int, tuple[InterruptTable, CountMatrix | None]] = {}
_lock = threading.Lock()


def table_matrix(table: InterruptTable) -> CountMatrix | None:
    """The count matrix of a table whose every counted IRQ is a row of it, in its order
    (as the sysfs reader builds them); else None."""
    with _lock:
        got = _kept.get(id(table))
    if got is not None and got[0] is table:
        return got[1]
    m = _table_matrix(table)
    with _lock:
        _kept[id(table)] = (table, m)
        while len(_kept) > _KEEP:
            del _kept[next(iter(_kept))]
    return m


def _table_matrix(table: InterruptTable) -> CountMatrix | None:
    irqs = table.irqs
    if not irqs:
        return None
    known = getattr(irqs, "matrix", None)  # the sysfs reader's (collectors/irq_sysfs.Named)
    if type(known) is CountMatrix:
        return known if len(known.irqs) else None
    got: CountMatrix | None = None
    n = 0
    for irq in irqs.values():
        c = irq.counts
        if c is None:
            continue
        if type(c) is not CountRow or (got is not None and c.matrix is not got):
            return None
        got = c.matrix
        if got.irqs[c.i] != irq.irq:
            return None
        n += 1
    return got if got is not None and n == len(got.irqs) else None
