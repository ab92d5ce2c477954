"""A per-CPU file of one tick as the columns it was parsed into, read as CPU -> row.

/proc/stat's cpuN lines, /proc/softirqs' NET_RX/NET_TX rows and softnet_stat are parsed
every tick into a row dataclass per CPU (`CpuTimes`, `SoftirqCounts`, `SoftnetRow`), and
at 1,024 CPUs nearly every consumer of a tick turned those 3,072 objects straight back
into columns: the rates and the doctor's window (`model/cpu_columns.py`) and the
recorder's walk (`record/codec.py`). Making the objects (~0.4 ms a file) and taking them
apart again (~0.3 ms for the rates, ~0.4 ms for the codec, each file) was most of what
these files cost. A `CpuTable` keeps what the parser made, an int64 array with a row per
CPU, and reads as the dict of rows it stands for (equal to it, pickled as it), so the
JSON, serve, the TUI and every `.get(cpu)` keep working; those that want the columns
take `array` as it is.

`array[i]` holds the first `array.shape[1]` fields of the row class for the i-th CPU
(the first field is `cpu`, so column 0 is the CPU ids, `cpus`); the class's remaining
fields are `consts`, one None or bool for every row (SoftnetRow's `cpu_from_column`).
Only a file every value of which fits this is made a table: anything odd (a value
beyond int64, a None in an int column, fields that differ by row) stays a dict.

The table never changes: the array is read-only, and the rows are made only when one
is asked for, each the same object from then on (`_some` for the first few asked, then
all at once). Two threads that ask at once may each make a row; both are equal to
the row the dict would hold, and one of them is kept.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Generic, Iterator, Mapping, TypeVar

from nettop.model.counts import numpy
from nettop.model.rows import build

if TYPE_CHECKING:
    import numpy as np

R = TypeVar("R")

# Rows asked for one by one before every row is made at once: one alone costs ~2 us,
# all 1,024 at once ~0.4 ms, so a reader of most rows pays for them once.
_ONE_BY_ONE = 32


class CpuTable(Mapping[int, R], Generic[R]):
    """CPU -> `cls` row, held as `array` (int64, a row per CPU, column 0 the CPU id) and
    `consts` (the class's trailing fields, alike in every row)."""

    __slots__ = ("cls", "cpus", "array", "consts", "_index", "_some", "_all")

    def __init__(self, cls: type[R], values: np.ndarray, consts: tuple[Any, ...] = ()) -> None:
        np = numpy()
        fields = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        if values.ndim != 2 or values.dtype != np.int64 or values.shape[1] + len(consts) != len(fields) \
                or fields[0] != "cpu":
            raise ValueError(f"a {cls.__name__} table has a row per CPU and a column per int field")
        if not all(c is None or type(c) is bool for c in consts):
            raise ValueError("a table's constant fields are None or bools")
        if not values.flags.owndata or not values.flags.c_contiguous:
            values = values.copy()  # nothing else holds it to change it later
        values.flags.writeable = False  # a snapshot's counts never change
        cpus = tuple(values[:, 0].tolist())
        if len(set(cpus)) != len(cpus):
            raise ValueError("a CPU twice in one table")
        self.cls = cls
        self.cpus = cpus
        self.array = values
        self.consts = consts
        self._index: dict[int, int] | None = None
        self._some: dict[int, R] = {}
        self._all: dict[int, R] | None = None

    def fields(self) -> tuple[str, ...]:
        """The names of `array`'s columns."""
        return tuple(f.name for f in dataclasses.fields(self.cls))[:self.array.shape[1]]  # type: ignore[arg-type]

    def column(self, name: str) -> list[Any]:
        """One field of every row, in `cpus`' order, without making the rows."""
        names = tuple(f.name for f in dataclasses.fields(self.cls))  # type: ignore[arg-type]
        k = names.index(name)
        if k < self.array.shape[1]:
            got: list[Any] = self.array[:, k].tolist()
            return got
        return [self.consts[k - self.array.shape[1]]] * len(self.cpus)

    def _where(self) -> dict[int, int]:
        got = self._index
        if got is None:
            self._index = got = dict(zip(self.cpus, range(len(self.cpus))))
        return got

    def _rows(self) -> dict[int, R]:
        """Every row, made at once (`rows.build`) the first time."""
        got = self._all
        if got is None:
            n = len(self.cpus)
            cols = [self.array[:, k].tolist() for k in range(self.array.shape[1])]
            cols += [[c] * n for c in self.consts]
            made = build(self.cls, *cols)
            some = self._some  # a row already handed out stays the one handed out
            if some:
                made = [some.get(c, r) for c, r in zip(self.cpus, made)]
            self._all = got = dict(zip(self.cpus, made))
        return got

    def __getitem__(self, cpu: int) -> R:
        got = self._all
        if got is not None:
            return got[cpu]
        row = self._some.get(cpu)
        if row is not None:
            return row
        i = self._where()[cpu]  # KeyError: not one of the table's CPUs
        if len(self._some) >= _ONE_BY_ONE:
            return self._rows()[cpu]
        row = self.cls(*self.array[i].tolist(), *self.consts)
        return self._some.setdefault(cpu, row)

    def get(self, cpu: Any, default: Any = None) -> Any:
        try:
            return self[cpu]
        except KeyError:
            return default

    def __contains__(self, cpu: object) -> bool:
        return cpu in self._where()

    def __iter__(self) -> Iterator[int]:
        return iter(self.cpus)

    def __len__(self) -> int:
        return len(self.cpus)

    def keys(self) -> Any:
        return self._rows().keys() if self._all is not None else super().keys()

    def values(self) -> Any:
        return self._rows().values()

    def items(self) -> Any:
        return self._rows().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CpuTable) and other.cls is self.cls and self.cpus == other.cpus \
                and len(self.consts) == len(other.consts) \
                and all(a is b for a, b in zip(self.consts, other.consts)):
            return other is self or bool(numpy().array_equal(self.array, other.array))
        if isinstance(other, Mapping):
            return self._rows() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping, unhashable as a dict is

    def __repr__(self) -> str:
        return f"CpuTable({self._rows()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self._rows()),))
