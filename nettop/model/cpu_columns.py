"""One snapshot's per-CPU counters as numpy columns, for the figures of 1,024 CPUs at once.

The snapshot keeps a dataclass per CPU (`CpuTimes`, `SoftirqCounts`, `SoftnetRow`):
what the readers, the JSON and the recordings want. Turning two of them into rates one
CPU at a time cost ~15 ms a tick at 1,024 CPUs, and the doctor's window walked the same
dataclasses again. Here the fields of every CPU are gathered in one pass into an int64
array (a row per CPU, a column per field), so `model/rates.py` and `doctor/window.py`
do their arithmetic on arrays and walk in Python only the few CPUs whose counts need
judging.

A mapping's columns are kept for the last few mappings asked for (by identity; the
mapping is held so its id cannot be reused): the tick's rates and the doctor's window
both read the newest snapshot, and the previous tick's newest is this tick's older one.
Snapshots' mappings are never changed after construction, so a kept gather stays right.

A value that is not an int within int64 (a damaged recording) gives no columns (None):
the caller then takes the per-CPU path, which judges and explains every value.

A big host's readers hand a `CpuTable` (model/cpu_table.py): the columns the parser
made, which are taken as they are (a view of its array), with no rows made or walked.
"""

from __future__ import annotations

import itertools
import operator
import threading
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from nettop.model.counts import numpy
from nettop.model.cpu_table import CpuTable

if TYPE_CHECKING:
    import numpy as np

TIMES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")  # CpuTimes.total's
SOFTIRQS = ("net_rx", "net_tx")
SOFTNET = ("processed", "dropped", "time_squeeze", "received_rps", "flow_limit_count")

# From this many CPUs the per-CPU figures are computed on these arrays: numpy (~90 ms to
# load) pays for itself within a tick or two there, and a small host never loads it.
ARRAYS_FROM = 256

# ints below this in magnitude, and sums of eight of them, are exact in int64 and float64,
# so the arrays give the IEEE result Python gives for the same expression on ints
EXACT = 1 << 50


class Columns:
    """`values[i]` are the `fields` of CPU `cpus[i]`, in the mapping's order."""

    __slots__ = ("cpus", "values")

    def __init__(self, cpus: tuple[int, ...], values: np.ndarray) -> None:
        self.cpus = cpus
        self.values = values

    def aligned(self, cpus: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None]:
        """(the rows of `cpus`, zeros for a CPU the mapping lacks; which of them it has, or
        None when it has every one)."""
        if self.cpus == tuple(cpus):
            return self.values, None
        np = numpy()
        where = dict(zip(self.cpus, range(len(self.cpus))))
        idx = np.fromiter((where.get(c, -1) for c in cpus), np.int64, len(cpus))
        has = idx >= 0
        rows = self.values[np.where(has, idx, 0)] if len(self.cpus) else np.zeros(
            (len(cpus), self.values.shape[1]), np.int64)
        rows[~has] = 0
        return rows, has


_KEEP = 24  # 3 kinds x 8 snapshots: a 5 s window at 1 s ticks, and the tick's pair
_kept: dict[tuple[int, tuple[str, ...]], tuple[Mapping[int, Any], Columns | None]] = {}
_lock = threading.Lock()


def columns(rows: Mapping[int, Any], fields: tuple[str, ...]) -> Columns | None:
    """The `fields` of every CPU of `rows` (CPU -> dataclass), or None when a value is not
    an int within int64."""
    if type(rows) is CpuTable:
        taken = _from_table(rows, fields)
        if taken is not None:
            return taken
    key = (id(rows), fields)
    with _lock:
        got = _kept.get(key)
    if got is not None and got[0] is rows:
        return got[1]
    cols = _gather(rows, fields)
    with _lock:
        _kept[key] = (rows, cols)
        while len(_kept) > _KEEP:
            del _kept[next(iter(_kept))]
    return cols


def _gather(rows: Mapping[int, Any], fields: tuple[str, ...]) -> Columns | None:
    np = numpy()
    n = len(fields)
    get = operator.attrgetter(*fields)
    try:
        flat = list(map(get, rows.values()) if n == 1 else itertools.chain.from_iterable(map(get, rows.values())))
    except AttributeError:
        return None
    if not set(map(type, flat)) <= {int}:  # floats, strings, None: judged per CPU
        return None
    try:
        values = np.fromiter(flat, np.int64, len(flat)).reshape(len(rows), n)
    except OverflowError:
        return None
    values.flags.writeable = False  # shared by every caller
    return Columns(tuple(rows), values)


def _from_table(table: CpuTable[Any], fields: tuple[str, ...]) -> Columns | None:
    """The `fields` of a table's array as they are (a read-only view: a slice when they
    are next to each other, as every field list above is); None when one is not a column
    of the array (a constant: `_gather` takes it as it takes a dict)."""
    names = table.fields()
    try:
        at = [names.index(f) for f in fields]
    except ValueError:
        return None
    lo, hi = at[0], at[-1] + 1
    values = table.array[:, lo:hi] if at == list(range(lo, hi)) else table.array[:, at]
    values.flags.writeable = False  # (a view of the read-only array is; a fancy index copy is not)
    return Columns(table.cpus, values)
