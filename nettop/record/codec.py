"""Snapshots to compact rows and back, without pickle or anything that runs code.

A snapshot is split into three parts:

* a *skeleton*: the snapshot as JSON with every counter replaced by a placeholder
  (`0` for an int, `0.0` for a float). It holds names, topology and configuration
  strings, changes rarely, and is stored once per change (the `config` table);
* an int vector: every int of the snapshot in walk order (counters, but also CPU ids
  in tuples, masks' numbers, MTUs), stored as zigzag varint deltas against a base
  vector and zlib-compressed;
* a float vector: timestamps, read cost, latency figures, as packed doubles.

Decoding builds the snapshot only from classes named in `CLASSES`, so a hostile file
can at worst fail to decode. Mapping keys stay literal in the skeleton (a CPU or IRQ
number is structure, not a counter).
"""

from __future__ import annotations

import array
import dataclasses
import functools
import json
import math
import operator
import struct
import sys
import zlib

try:
    import lzma
except ImportError:  # a Python built without liblzma still reads and writes zlib rows
    lzma = None  # type: ignore[assignment]  # mypy types a module as never None; every use tests lzma or LZMA_FILTERS
from itertools import chain, compress, islice, repeat
from typing import Any, Callable, Iterator

import enum
import types

from nettop.model import snapshot as S
from nettop.model.counts import CountRow, numpy
from nettop.model.cpu_table import CpuTable
from nettop.ebpf import sample as E
from nettop.ping.stats import LatencyStats
from nettop.model.problems import Problem


def _registry(module: types.ModuleType, prefix: str) -> dict[str, type]:
    return {prefix + name: obj for name, obj in vars(module).items()
            if isinstance(obj, type) and obj.__module__ == module.__name__
            and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))}


# The only types a recording can produce: snapshot.py's and the eBPF sample's.
CLASSES: dict[str, type] = {
    **_registry(S, ""), **_registry(E, "ebpf."), "LatencyStats": LatencyStats, "Problem": Problem,
}
_IRQ_HEAD = ("irq", "chip", "hwirq", "name", "counts")  # Irq's fields before `total`
_COUNTS, _TOTAL, _NUMBER = operator.attrgetter("counts"), operator.attrgetter("total"), operator.attrgetter("irq")
_NAMING = operator.attrgetter("chip", "hwirq", "name")
_MATRIX, _ROW = operator.attrgetter("matrix"), operator.attrgetter("i")
_STR_OR_NONE = {str, type(None)}
_HELD, _HIT_PIECE, _HIT_INTS, _HIT_FLOATS = (operator.itemgetter(i) for i in range(4))  # IntParts.kept's
_MISS = (None, None, (), ())  # IntParts.settings' entry for an object not seen last sample: held by nobody
_IRQ_TABLE = "irq-table"  # IntParts.seen's key of the last IRQ table's heads and skeletons
_READ_AGAIN = "read-again"  # IntParts.seen's key of `IntParts.again`'s memo, carried sample to sample
_READ_AGAIN_MAX = 8192  # entries: a few per queue and IRQ of the biggest hosts; cleared when full
_NAMES: dict[type, str] = {c: n for n, c in CLASSES.items()}
_FIELDS: dict[type, tuple[str, ...]] = {
    c: tuple(f.name for f in dataclasses.fields(c)) for c in CLASSES.values() if dataclasses.is_dataclass(c)
}


# The fields of each dataclass as one C-level call (a tuple even for one field); Irq is
# left out: its `total` is stored as a difference (`_enc_other`).
def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


_GETTERS: dict[type, Callable[[Any], tuple]] = {c: _getter(names) for c, names in _FIELDS.items() if c is not S.Irq}


def _snapshot_fields(obj: Any, _all: Callable[[Any], tuple] = _GETTERS[S.Snapshot]) -> tuple:
    """Snapshot's fields; the optional fields added last with a default (`tuning`,
    `uptime_s`) are left out from the end while None, so a snapshot without them encodes
    exactly as before they existed."""
    values = _all(obj)
    n = len(values)
    while n > _SNAPSHOT_REQUIRED and values[n - 1] is None:
        n -= 1
    return values if n == len(values) else values[:n]


_SNAPSHOT_REQUIRED = _FIELDS[S.Snapshot].index("tuning")  # fields before the trailing optional ones
_GETTERS[S.Snapshot] = _snapshot_fields


def _read_at_dropped(cls: type) -> Callable[[Any], tuple]:
    """The fields of a setting (QueueConfig, BqlState, IrqAffinity, DeviceConfig) with a trailing
    `read_at` left out while None (a recording made before the settings rotation, a
    captured tree), so such snapshots encode exactly as before it was added."""
    every = _GETTERS[cls]
    assert _FIELDS[cls][-1] == "read_at"

    def fields(obj: Any) -> tuple:
        values = every(obj)
        return values[:-1] if values[-1] is None else values
    return fields


for _cls in (S.QueueConfig, S.BqlState, S.IrqAffinity, S.DeviceConfig):
    _GETTERS[_cls] = _read_at_dropped(_cls)


class CodecError(ValueError):
    """A row that cannot be turned back into a snapshot (corrupt or foreign)."""


def split(snap: S.Snapshot) -> tuple[str, list[int], list[float]]:
    """(skeleton JSON, ints, floats) of one snapshot."""
    ints: list[int] = []
    floats: list[float] = []
    tree = _enc(snap, ints, floats)
    return json.dumps(tree, separators=(",", ":")), ints, floats


class IrqGrid:
    """The ints of a table's IRQs taken in bulk (`IntParts.irq_table`) when they are the
    rows of one count matrix in its order (the sysfs reader's table): for each IRQ its
    number, its row of counts and its total less the row's sum. One element of an
    `IntParts` for them all, copied into the vector as one strided block."""

    __slots__ = ("nums", "matrix", "diffs")

    def __init__(self, nums: list[int], matrix: Any, diffs: list[int]) -> None:
        self.nums, self.matrix, self.diffs = nums, matrix, diffs

    def __len__(self) -> int:
        r, width = self.matrix.values.shape
        return int(r * (width + 2))

    def tolist(self) -> list[int]:
        out: list[int] = []
        for num, row, diff in zip(self.nums, self.matrix.values.tolist(), self.diffs):
            out.append(num)
            out.extend(row)
            out.append(diff)
        return out

    def fill(self, out: Any) -> bool:
        """Write the ints into `out` (an int64 array of len(self)); whether all of them are
        `small_vector` values. OverflowError when a number or total does not fit 64 bits."""
        np = numpy()
        values = self.matrix.values
        r, width = values.shape
        grid = out.reshape(r, width + 2)
        edges = np.array(self.nums + self.diffs, dtype=np.int64)  # one flat list: numpy takes a nested one slowly
        grid[:, 0] = edges[:r]
        grid[:, 1:width + 1] = values
        grid[:, width + 1] = edges[r:]
        return _small_block(values) and small_vector(edges)


def _small_block(values: Any) -> bool:
    """`small_vector` of an integer array of any width: one of 32 bits or less always is."""
    return values.dtype.itemsize <= 4 or small_vector(values.ravel())


class IntParts(list):
    """`split_parts`' int vector: the walk's ints, but blocks of them left as arrays, each
    one element in its place, `rows` their positions: each IRQ's `CountRow` (its numpy
    row, not ~1,000 Python ints), a table's IRQs taken in bulk (`IrqGrid`), and the
    int64 array of a `CpuTable` (a big host's per-CPU file as its reader parsed it).

    At 1,024 CPUs the count rows are ~530,000 of a sample's ~560,000 ints; turning them
    into Python ints and back into an array cost the recorder ~25 ms a sample, and the
    per-CPU tables' ~21,000 a further ~0.8 ms."""

    __slots__ = ("rows", "seen", "kept", "sums", "again")

    def __init__(self, seen: dict[int, tuple] | None = None) -> None:
        super().__init__()
        self.rows: list[int] = []
        self.seen = seen or {}  # id -> (object, skeleton, ints, floats) of the last sample
        self.kept: dict[int, tuple] = {}  # the same, of this sample: the next one's `seen`
        self.sums: tuple[Any, list[int]] | None = None  # (a count matrix, its row sums): `irq`
        # (type, fields but read_at, their types) -> (skeleton, ints) of a setting read
        # again (`again`); the same dict from sample to sample, under _READ_AGAIN
        again = self.seen.get(_READ_AGAIN)  # type: ignore[call-overload]
        self.again: dict[tuple, tuple] = again if again is not None else {}
        self.kept[_READ_AGAIN] = self.again  # type: ignore[index, assignment]

    def remembered(self, obj: Any, floats: list[float]) -> Any:
        """`_enc` of a setting object (_REMEMBERED), or a tuple of more than 8 values, that
        the last sample held too: the collectors hand the same frozen object on until they
        read the setting again, so its skeleton and values are those of last time. ~2,500
        of them at 1,024 CPUs (queue configs, BQL, affinities, queue IRQs, and the tuples
        of a device's queues) were a third of the walk."""
        hit = self.seen.get(id(obj))
        if hit is not None and hit[0] is obj:
            self.extend(hit[2])
            floats.extend(hit[3])
        else:
            t = type(obj)
            key = _again_key(obj) if t in _HEADS else None
            got = self.again.get(key) if key is not None else None
            if got is not None:  # read again, and as it was: only its read_at is new
                piece, ints = got
                self.extend(ints)
                floats.append(obj.read_at)
                hit = (obj, piece, ints, (obj.read_at,))
                self.kept[id(obj)] = hit
                return piece
            n_ints, n_floats, n_rows = len(self), len(floats), len(self.rows)
            piece = (_enc_items(obj, self, floats) if t is tuple
                     else _setting_skeleton(_NAMES[t], _enc_items(_GETTERS[t](obj), self, floats)))
            if len(self.rows) != n_rows:  # holds a count row: not kept (none of _REMEMBERED does)
                return piece
            hit = (obj, piece, tuple(self[n_ints:]), tuple(floats[n_floats:]))
            if key is not None and len(hit[3]) == 1:  # its one float is read_at (`_again_key`)
                if len(self.again) >= _READ_AGAIN_MAX:
                    self.again.clear()
                self.again[key] = (piece, hit[2])
        self.kept[id(obj)] = hit
        return hit[1]

    def settings(self, values: list[Any] | tuple[Any, ...], floats: list[float]) -> list[Any]:
        """`_enc` of each of `values`, every one of a _REMEMBERED class (a mapping's IRQ
        affinities, a device's queue settings): `remembered` of each, with the last
        sample's objects found in a few C-level passes. At 1,024 CPUs the 516 IRQ
        affinities were ~0.5 ms a sample one `_enc` and `remembered` call at a time; when
        all of them are last sample's (most ticks) no Python runs per value.

        When some are new (the settings rotation re-reads ~40 of a device's 256 queue
        settings each tick) only those are walked: the runs of last sample's objects
        between them are taken whole (`_take`). A loop over all 256 values was ~0.3 ms a
        sample at 1,024 CPUs (two such tuples a tick)."""
        ids = list(map(id, values))
        hits = list(map(self.seen.get, ids, repeat(_MISS)))
        held = list(map(operator.is_, map(_HELD, hits), values))
        out = list(map(_HIT_PIECE, hits))  # a new one's is put in below
        if all(held):
            self._take(ids, hits, floats)
            return out
        start = 0
        for k in compress(range(len(held)), map(operator.not_, held)):
            if start < k:
                self._take(ids[start:k], hits[start:k], floats)
            out[k] = self.remembered(values[k], floats)
            start = k + 1
        if start < len(held):
            self._take(ids[start:], hits[start:], floats)
        return out

    def _take(self, ids: list[int], hits: list[tuple[Any, ...]], floats: list[float]) -> None:
        """Append the ints and floats of last sample's objects (their `seen` entries,
        `hits`, under their ids) and keep them for the next sample, in C-level passes."""
        self.extend(chain.from_iterable(map(_HIT_INTS, hits)))
        floats.extend(chain.from_iterable(map(_HIT_FLOATS, hits)))
        self.kept.update(zip(ids, hits))

    def irq(self, obj: S.Irq, floats: list[float]) -> Any:
        """`_enc_other` of an IRQ whose counts are a `CountRow`: its head (number, chip,
        hwirq, name, and the run of counts) is the same skeleton and ints as last sample's
        IRQ of the same head, so it is looked up, not walked; `total` is stored as its
        difference from the row's sum, taken for the whole matrix at once (a numpy sum
        per IRQ was ~1.5 ms a sample at 1,024 CPUs)."""
        counts = obj.counts
        assert type(counts) is CountRow
        key = (type(obj.irq), obj.irq, type(obj.chip), obj.chip, type(obj.hwirq), obj.hwirq,
               type(obj.name), obj.name, len(counts))
        hit = self.seen.get(key)  # type: ignore[call-overload]  # tuple keys beside ids
        if hit is None:
            n_ints, n_floats = len(self), len(floats)
            head = [_enc(getattr(obj, n), self, floats) for n in _IRQ_HEAD]
            piece = {"c": "Irq", "f": head + [0], "t": 1}
            if len(floats) == n_floats and self.rows and self.rows[-1] == len(self) - 1:
                self.kept[key] = (piece, tuple(self[n_ints:-1]))  # type: ignore[index]
        else:
            piece, head_ints = hit
            self.extend(head_ints)
            self.rows.append(len(self))
            self.append(counts)
            self.kept[key] = hit  # type: ignore[index]
        m = counts.matrix
        if self.sums is None or self.sums[0] is not m:
            self.sums = (m, m.row_sums())
        assert isinstance(obj.total, int)  # the caller's test (_enc_other)
        self.append(obj.total - self.sums[1][counts.i])
        return piece

    def irq_table(self, values: list[Any], floats: list[float]) -> list[Any] | None:
        """`_enc` of each of a table's IRQs (InterruptTable.irqs' values) when all are
        `Irq`s with an int `total` and counts from one `CountRow` matrix, in a few C-level
        passes; None (nothing appended) otherwise.

        Each IRQ is its number, its count row and `total` less the row's sum (`irq`); its
        skeleton depends only on its head (number, chip, hwirq, name) and the row's width.
        While the heads are those of the last sample (an IRQ that comes, goes or is
        renamed changes them), the skeletons are the last sample's: at 1,024 CPUs, 516
        IRQs one by one were ~2.5 ms a sample. The heads compare equal only when the
        numbers are all plain ints and the other fields str or None, so equal heads are
        equal skeletons."""
        if len(values) < 2 or set(map(type, values)) != {S.Irq}:
            return None
        counts = list(map(_COUNTS, values))
        totals = list(map(_TOTAL, values))
        if set(map(type, counts)) != {CountRow} or set(map(type, totals)) != {int}:
            return None
        matrices = set(map(id, map(_MATRIX, counts)))
        if len(matrices) != 1:
            return None
        nums = list(map(_NUMBER, values))
        names = list(map(_NAMING, values))
        if set(map(type, nums)) != {int} or not set(map(type, chain.from_iterable(names))) <= _STR_OR_NONE:
            return None
        m = counts[0].matrix
        width = len(counts[0])
        last = self.seen.get(_IRQ_TABLE)  # type: ignore[call-overload]
        if last is not None and last[2] == width and last[0] == nums and last[1] == names:
            pieces = last[3]
        else:  # the first sample, or an IRQ came, went or changed: one by one (which appends)
            pieces = [self.irq(v, floats) for v in values]
            self.kept[_IRQ_TABLE] = (nums, names, width, pieces)  # type: ignore[index]
            return pieces
        if self.sums is None or self.sums[0] is not m:
            self.sums = (m, m.row_sums())
        at = list(map(_ROW, counts))
        diffs = list(map(operator.sub, totals, map(self.sums[1].__getitem__, at)))
        start = len(self)
        if len(at) == len(m.irqs) and at == list(range(len(at))):  # the matrix's rows in order
            self.rows.append(start)
            self.append(IrqGrid(nums, m, diffs))
        else:
            self.extend(chain.from_iterable(zip(nums, counts, diffs)))
            self.rows.extend(range(start + 1, start + 3 * len(values), 3))
        self.kept[_IRQ_TABLE] = last  # type: ignore[index]
        return pieces

    def block(self, values: Any) -> None:
        """Append the ints of an int64 array (a `CpuTable`'s, in C order) as one element."""
        self.rows.append(len(self))
        self.append(values.ravel())

    def ints(self) -> list[int]:
        """The vector as `split` gives it."""
        if not self.rows:
            return list(self)
        out: list[int] = []
        start = 0
        for pos in self.rows:
            out.extend(self[start:pos])
            block = self[pos]
            out.extend(block.array.tolist() if type(block) is CountRow else block.tolist())
            start = pos + 1
        out.extend(self[start:])
        return out

    def array(self, buffer: Callable[[int], Any] | None = None) -> Any:
        """The vector as a numpy int64 array, or None when a value does not fit 64 bits
        signed (then it can only be stored as lists, `pack_ints`). `buffer(n)`: an int64
        array of n to fill, for a caller that reuses its memory (a fresh 4.5 MB array is
        ~1,100 page faults, ~1 ms in a VM, each sample)."""
        return self.vector(buffer)[0]

    def vector(self, buffer: Callable[[int], Any] | None = None) -> tuple[Any, bool]:
        """(`array`, whether it is a `small_vector`), the second known from the blocks'
        widths and a look at the few values not in a count matrix: the Writer's test of
        all ~560,000 values at 1,024 CPUs was ~0.2 ms a sample."""
        np = numpy()
        rows = self.rows
        start, plain = 0, []
        for pos in rows:
            plain.append(self[start:pos])
            start = pos + 1
        plain.append(self[start:])
        try:
            flat = np.array(list(chain.from_iterable(plain)), dtype=np.int64)
        except OverflowError:
            return None, False
        small = small_vector(flat)
        if not rows:
            return flat, small
        blocks = [self[pos] for pos in rows]
        n = len(flat) + sum(map(len, blocks))
        out = buffer(n) if buffer is not None else np.empty(n, dtype=np.int64)
        at = taken = 0
        for part, block in zip(plain, blocks):
            k = len(part)
            out[at:at + k] = flat[taken:taken + k]
            at, taken = at + k, taken + k
            k = len(block)
            t = type(block)
            if t is IrqGrid:
                try:
                    small = block.fill(out[at:at + k]) and small
                except OverflowError:
                    return None, False
            else:
                values = block.array if t is CountRow else block
                out[at:at + k] = values
                small = small and _small_block(values)
            at += k
        out[at:] = flat[taken:]
        return out, small


# Settings the collectors keep as the same object from tick to tick until they read
# them again (settings_rotation, queue IRQs): IntParts.remembered.
_REMEMBERED = frozenset((S.QueueConfig, S.BqlState, S.IrqAffinity, S.QueueIrqs, S.QueueMap))


# The fields before `read_at` of the settings the rotation reads again (settings_rotation):
# IntParts.remembered finds one read again unchanged by them (`_again_key`).
_HEADS: dict[type, Callable[[Any], tuple]] = {
    cls: operator.attrgetter(*_FIELDS[cls][:-1]) for cls in (S.QueueConfig, S.BqlState, S.IrqAffinity)}
_PLAIN = frozenset((int, str, bool, type(None)))  # field types whose equal values encode alike
_INTS = frozenset((int,))


def _again_key(obj: Any) -> tuple | None:
    """The key under which a setting read again encodes as one read before with the same
    key, but for its `read_at` (the rotation re-reads ~250 files a tick at 1,024 CPUs,
    each a new object of last time's fields: ~100 walks of their fields a sample).
    None when it may not: `read_at` not a float, or a field whose equal values may
    encode otherwise (a float: 0.0 and -0.0; a tuple not all plain ints: 1 and True).
    Its fields' types are part of the key, so 1 and True are two keys."""
    if type(obj.read_at) is not float:
        return None
    head = _HEADS[type(obj)](obj)
    kinds = tuple(map(type, head))
    for k, v in zip(kinds, head):
        if k is tuple:
            if v and set(map(type, v)) != _INTS:
                return None
        elif k not in _PLAIN:
            return None
    return (type(obj), head, kinds)


def split_parts(snap: S.Snapshot, seen: dict[int, tuple] | None = None) -> tuple[Any, IntParts, list[float]]:
    """`split`, with the count rows left as arrays (IntParts) and the skeleton as its
    tree (`skeleton_text` makes the JSON): what the Writer takes. `seen`: the last
    sample's `IntParts.kept`, whose objects need no walk again."""
    ints = IntParts(seen)
    floats: list[float] = []
    return _enc(snap, ints, floats), ints, floats


def skeleton_text(tree: Any) -> str:
    """The skeleton's JSON, as `split` gives it."""
    return json.dumps(tree, separators=(",", ":"))


_SCALARS = frozenset((int, str, bool, type(None)))  # equal values of one of these types dump alike


def same_tree(a: Any, b: Any) -> bool:
    """Whether two skeleton trees dump to the same JSON (`skeleton_text`), without dumping
    them: True only for the same structure with values of the same types (0, 0.0 and
    False compare equal but dump differently) and floats of the same sign. A sub-tree
    that is the same object in both (the Writer reuses the last sample's pieces: kept
    settings, an IRQ table's skeletons, per-CPU rows) is not looked into, and lists of
    equal plain values are compared at C speed, so two 1,024-CPU samples' trees compare
    in a small part of what a fingerprint of the whole tree took (`marshal`, ~1.3 ms).
    False may also mean "not known to be the same" (a NaN, a value of another type):
    the caller then dumps the tree, which is never wrong."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is list:
        return len(a) == len(b) and _same_items(a, b)
    if t is dict:
        keys = list(a)
        return (keys == list(b) and set(map(type, keys)) <= {str}
                and _same_items(list(a.values()), list(b.values())))
    if t in _SCALARS:
        return bool(a == b)
    if t is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return False


def _same_items(a: list[Any], b: list[Any]) -> bool:
    """`same_tree` of two lists of the same length, item by item: in C for plain values
    (a mapping's keys) and for items that are the same object in both."""
    kinds = list(map(type, a))
    if kinds != list(map(type, b)):
        return False
    if set(kinds) <= _SCALARS:
        return a == b  # of one type each: equal values dump alike
    last: tuple[Any, Any] | None = None
    for x, y in compress(zip(a, b), map(operator.is_not, a, b)):
        if type(x) in _SCALARS:
            if x != y:
                return False
        elif last is None or x is not last[0] or y is not last[1]:  # not a row's skeleton repeated ([row] * n)
            if not same_tree(x, y):
                return False
            last = (x, y)
    return True


def _enc(obj: Any, ints: list[int], floats: list[float]) -> Any:
    """The skeleton of `obj`, appending its counters to `ints` and `floats`.

    Exact builtin types are tested first, and a tuple of plain ints (per-CPU counts:
    most of a 64-CPU snapshot) is copied in one step: a 64-CPU snapshot has ~7 000
    nodes, and one type test chain per node was most of the recorder's cost. Anything
    else (enums, subclasses, dataclasses, mappings) takes `_enc_other`, which gives
    the same skeleton the plain chain always did.
    """
    t = type(obj)
    if t is int:
        ints.append(obj)
        return 0
    if t is float:
        floats.append(obj)
        return 0.0
    if t is tuple:
        if len(obj) > 8 and type(ints) is IntParts:  # a device's queue settings, online CPUs: often last sample's
            return ints.remembered(obj, floats)
        return _enc_items(obj, ints, floats)
    if t is CountRow:  # an IRQ's counts from the sysfs reader: stored as the tuple it reads as
        if type(ints) is IntParts:  # kept as its array (split_parts)
            ints.rows.append(len(ints))
            ints.append(obj)
            n = len(obj)
        else:
            vals = obj.array.tolist()
            ints.extend(vals)
            n = len(vals)
        return {"n": n} if n >= 2 else [0] * n
    if t is str or obj is None or t is bool:
        return obj
    get = _GETTERS.get(t)
    if get is not None:
        if t in _REMEMBERED and type(ints) is IntParts:
            return ints.remembered(obj, floats)
        return {"c": _NAMES[t], "f": _enc_items(get(obj), ints, floats)}
    return _enc_other(obj, ints, floats)


def _enc_items(values: tuple, ints: list[int], floats: list[float]) -> Any:
    """A tuple's or a dataclass's values: all plain ints (a run of counters) in one step,
    written in the skeleton as {"n": count} (format 3: a 1,024-CPU host's IRQ counts
    were a megabyte of "0," per sample to dump and hash)."""
    n = len(values)
    if n > 8:  # per-CPU counts: one C-level pass (a 1,024-CPU sample has 550 such tuples)
        kinds = set(map(type, values))
        if kinds != _INT_ONLY:
            if kinds <= _REMEMBERED and type(ints) is IntParts:
                return ints.settings(values, floats)
            return [_enc(v, ints, floats) for v in values]
    else:
        for v in values:
            if type(v) is not int:
                return [_enc(v, ints, floats) for v in values]
    ints.extend(values)
    return {"n": n} if n >= 2 else [0] * n


_INT_ONLY = {int}


def _int_table(values: list[Any], ints: list[int]) -> list[Any] | None:
    """The skeletons of a mapping's values when they are all one dataclass whose fields
    are, column by column, all plain ints or all one None/bool (a per-CPU table:
    /proc/stat, softnet, softirqs), their ints appended in a few C-level passes; None
    (nothing appended) otherwise. The skeleton is what `_enc` gives each of them.
    3,072 such rows at 1,024 CPUs, ~3 us each through `_enc`."""
    t = type(values[0])
    get = _GETTERS.get(t)
    if get is None or t in _REMEMBERED or set(map(type, values)) != {t}:
        return None
    rows = list(map(get, values))
    if len(set(map(len, rows))) != 1:
        return None
    skeleton: list[Any] = []
    for column in zip(*rows):
        kinds = set(map(type, column))
        if kinds == _INT_ONLY:
            skeleton.append(0)
        elif len(kinds) == 1 and (column[0] is None or type(column[0]) is bool) and len(set(column)) == 1:
            skeleton.append(column[0])  # literal in the skeleton, the same in every row
        else:
            return None
    n = len(skeleton)
    if all(v == 0 and type(v) is int for v in skeleton):
        ints.extend(chain.from_iterable(rows))
        return [_row_skeleton(_NAMES[t], ("n", n) if n >= 2 else [0] * n)] * len(values)
    taken = [k for k, v in enumerate(skeleton) if type(v) is int]
    if taken:
        pick = operator.itemgetter(*taken)
        ints.extend(chain.from_iterable(map(pick, rows)) if len(taken) > 1 else map(pick, rows))
    return [_row_skeleton(_NAMES[t], skeleton)] * len(values)


def _table_columns(table: CpuTable[Any], ints: list[int]) -> list[Any]:
    """`_int_table` of a `CpuTable`'s rows (a big host's per-CPU file, as its reader
    parsed it), taken from its array: the same skeletons, and the same ints in the same
    order (row by row, each row's int fields in field order: the array's C order), with
    no row made. Its constant fields are None or bools (CpuTable's rule), the literals
    `_int_table` writes for a column alike in every row."""
    k = table.array.shape[1]
    if type(ints) is IntParts:
        ints.block(table.array)  # left an array (IntParts.vector copies it)
    else:
        ints.extend(table.array.ravel().tolist())
    fields: Any = (("n", k) if k >= 2 else [0] * k) if not table.consts else [0] * k + list(table.consts)
    return [_row_skeleton(_NAMES[table.cls], fields)] * len(table)


_TABLE_SKELETONS: dict[tuple[Any, ...], dict[str, Any]] = {}


def _table_skeleton(table: CpuTable[Any], ints: list[int]) -> dict[str, Any]:
    """A `CpuTable`'s skeleton, {"k": its CPUs, "v": `_table_columns`}, the same object
    while its class, CPUs and constant fields are: the Writer's `same_tree` then passes
    a 1,024-CPU table by identity instead of comparing its 1,024 keys and rows (three
    tables, ~0.3 ms a sample). Keyed by the constants' types too (False is not None)."""
    rows = _table_columns(table, ints)
    key = (table.cls, table.array.shape[1], tuple((type(c), c) for c in table.consts), table.cpus)
    got = _TABLE_SKELETONS.get(key)
    if got is None or got["v"][0] is not rows[0]:  # a row skeleton made again (its cache was cleared)
        if len(_TABLE_SKELETONS) >= 16:  # a few tables of one CPU set; grows only on hotplug
            _TABLE_SKELETONS.clear()
        got = _TABLE_SKELETONS[key] = {"k": list(table.cpus), "v": rows}
    return got


_ROW_SKELETONS: dict[tuple[Any, ...], dict[str, Any]] = {}


def _row_skeleton(name: str, fields: list[Any] | tuple[str, int]) -> dict[str, Any]:
    """The skeleton of a per-CPU table's row, {"c": name, "f": fields} (("n", k): a run of
    k counters, {"n": k}), the same object for the same skeleton from sample to sample,
    so the Writer's `same_tree` finds a table's 1,024 rows unchanged by identity. Keyed
    by each field's type and value: 0, 0.0 and False are equal but dump differently."""
    key = (name, fields) if type(fields) is tuple else (name, *((type(v), v) for v in fields))
    got = _ROW_SKELETONS.get(key)
    if got is None:
        if len(_ROW_SKELETONS) >= 64:  # a handful of classes; never grows with time
            _ROW_SKELETONS.clear()
        got = {"c": name, "f": {"n": fields[1]} if type(fields) is tuple else list(fields)}
        _ROW_SKELETONS[key] = got
    return got


_SETTING_SKELETONS: dict[tuple[Any, ...], dict[str, Any]] = {}
_FLAT = frozenset((int, float, str, bool, type(None)))  # a setting's field skeletons kept shared


def _setting_skeleton(name: str, fields: Any) -> dict[str, Any]:
    """A setting's skeleton, {"c": name, "f": fields}, the same object as the last one
    made alike when its fields are all flat (placeholders, strings, None, bools: a queue
    config, a BQL state). The settings rotation re-reads ~90 of them a tick at 1,024
    CPUs, each a new object with last time's skeleton; the Writer's `same_tree` then
    passes them by identity instead of comparing each one (~0.5 ms a sample). Keyed by
    each field's type and value: 0, 0.0 and False are equal but dump differently (and a
    float field's skeleton is always the placeholder 0.0, never -0.0 or NaN)."""
    if type(fields) is dict:  # a run of counters, {"n": k}
        key: tuple[Any, ...] = (name, fields["n"])
    elif set(map(type, fields)) <= _FLAT:
        key = (name, tuple(map(type, fields)), *fields)
    else:
        return {"c": name, "f": fields}
    got = _SETTING_SKELETONS.get(key)
    if got is None:
        if len(_SETTING_SKELETONS) >= 4096:  # a few thousand settings on the biggest hosts
            _SETTING_SKELETONS.clear()
        got = _SETTING_SKELETONS[key] = {"c": name, "f": fields}
    return got


_ZEROS: dict[int, list[int]] = {}


def _zeros(n: int) -> list[int]:
    """The skeleton of a mapping's n plain int values, [0] * n, the same object for the
    same n: such a mapping (the CPUs' NUMA nodes, 1,024 at 1,024 CPUs) cost ~0.2 ms a
    sample one `_enc` per value, and the Writer's `same_tree` then compared its 1,024
    placeholders; the same list passes by identity."""
    got = _ZEROS.get(n)
    if got is None:
        if len(_ZEROS) >= 16:  # a few sizes (the CPU count); grows only on hotplug
            _ZEROS.clear()
        got = _ZEROS[n] = [0] * n
    return got


def _enc_other(obj: Any, ints: list[int], floats: list[float]) -> Any:
    if isinstance(obj, enum.Enum):
        return {"e": _NAMES[type(obj)], "v": obj.value}
    if obj is None or obj is True or obj is False or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        ints.append(obj)
        return 0
    if isinstance(obj, float):
        floats.append(obj)
        return 0.0
    if isinstance(obj, tuple):
        return [_enc(v, ints, floats) for v in obj]
    cls = type(obj)
    if cls is S.Irq and type(obj.counts) is CountRow and type(ints) is IntParts and isinstance(obj.total, int):
        return ints.irq(obj, floats)
    if cls is S.Irq and obj.counts is not None and isinstance(obj.total, int):
        # total is the sum of the per-CPU counts: store only what it differs by (0), so a
        # busy IRQ's noise is paid once, not twice
        head = [_enc(getattr(obj, n), ints, floats) for n in _IRQ_HEAD]
        counts = obj.counts
        ints.append(obj.total - (int(counts.array.sum(dtype="u8")) if type(counts) is CountRow else sum(counts)))
        return {"c": "Irq", "f": head + [0], "t": 1}
    names = _FIELDS.get(cls)
    if names is not None:
        return {"c": _NAMES[cls], "f": [_enc(getattr(obj, n), ints, floats) for n in names]}
    if cls is CpuTable and len(obj) > 8:
        return _table_skeleton(obj, ints)
    if hasattr(obj, "items"):
        keys = list(obj.keys())
        values = [obj[k] for k in keys]
        table = None
        if len(values) > 8:
            table = None
            if set(map(type, values)) == _INT_ONLY:  # a number per CPU (HostTuning.cpu_nodes)
                ints.extend(values)
                return {"k": keys, "v": _zeros(len(values))}
            if type(ints) is IntParts:
                table = (ints.settings(values, floats) if set(map(type, values)) <= _REMEMBERED
                         else ints.irq_table(values, floats))
            if table is None:
                table = _int_table(values, ints)
        return {"k": keys, "v": table if table is not None else [_enc(v, ints, floats) for v in values]}
    raise CodecError(f"cannot record a value of type {cls.__name__}")


def join(skeleton: Any, ints: list[int], floats: list[float]) -> S.Snapshot:
    """The snapshot from a parsed skeleton and its vectors; CodecError if they disagree."""
    return Decoder(skeleton).build(ints, floats)


_ERRORS = (StopIteration, KeyError, TypeError, ValueError, AttributeError, RecursionError)


class Decoder:
    """A parsed skeleton turned once into nested builder functions.

    A 64-CPU snapshot has ~7 000 skeleton nodes; walking them with type tests per node
    costs ~2.5 ms a snapshot, which is what replaying, exporting and reporting spend
    most on. Compiled per configuration (a recording has a handful), a run of counters
    (a tuple of per-CPU counts, a dataclass of only counters) becomes one C-level slice
    of the vector. Still only the classes of CLASSES are ever built.
    """

    __slots__ = ("n_ints", "n_floats", "_build")

    def __init__(self, skeleton: Any) -> None:
        counts = [0, 0]
        try:
            self._build = _compile(skeleton, counts)
        except _ERRORS as exc:
            raise CodecError(f"configuration cannot be read: {exc!r}") from None
        self.n_ints, self.n_floats = counts

    def build(self, ints: list[int], floats: list[float]) -> S.Snapshot:
        if len(ints) != self.n_ints or len(floats) != self.n_floats:
            more = len(ints) > self.n_ints or len(floats) > self.n_floats
            raise CodecError(f"sample has {'more' if more else 'fewer'} values than its configuration")
        try:
            snap = self._build(iter(ints), iter(floats))
        except _ERRORS as exc:
            raise CodecError(f"sample does not match its configuration: {exc!r}") from None
        if not isinstance(snap, S.Snapshot):
            raise CodecError("row is not a snapshot")
        return snap


Builder = Callable[[Iterator[int], Iterator[float]], Any]


def _next_int(it: Iterator[int], ft: Iterator[float]) -> int:
    return next(it)


def _next_float(it: Iterator[int], ft: Iterator[float]) -> float:
    return next(ft)


def _constant(value: Any) -> Builder:
    return lambda it, ft: value


def _counters(k: int, make: Callable[..., Any]) -> Builder:
    """k consecutive counters as one slice: make(*values) (a tuple or a dataclass)."""
    if make is tuple:
        return lambda it, ft: tuple(islice(it, k))
    return lambda it, ft: make(*islice(it, k))


def _run(node: dict, counts: list[int]) -> int:
    """The length of a run marker {"n": count}; TypeError/ValueError when it is not one."""
    n = node["n"]
    if len(node) != 1 or type(n) is not int or not 0 <= n <= MAX_VALUES - counts[0]:
        raise ValueError(f"a run of {n!r} counters")
    counts[0] += n
    return n


def _compile(node: Any, counts: list[int]) -> Builder:
    if node is None or node is True or node is False or isinstance(node, str):
        return _constant(node)
    if type(node) is int:  # a placeholder: literal ints only occur as mapping keys
        counts[0] += 1
        return _next_int
    if type(node) is float:
        counts[1] += 1
        return _next_float
    if isinstance(node, list):
        if node and all(type(v) is int for v in node):
            counts[0] += len(node)
            return _counters(len(node), tuple)
        parts = [_compile(v, counts) for v in node]
        return lambda it, ft: tuple([p(it, ft) for p in parts])
    if not isinstance(node, dict):
        raise TypeError(f"unexpected {type(node).__name__} in a skeleton")
    if "n" in node:  # format 3: a run of n counters (a tuple of ints)
        return _counters(_run(node, counts), tuple)
    if "e" in node:
        return _constant(CLASSES[node["e"]](node["v"]))  # built (and checked) once
    if "c" in node:
        cls = CLASSES[node["c"]]
        fields = node["f"]
        if isinstance(fields, dict):  # format 3: a dataclass of only counters
            return _counters(_run(fields, counts), cls)
        if not isinstance(fields, list):
            raise TypeError("fields of a class are not a list")
        if node.get("t") and cls is S.Irq:
            parts = [_compile(v, counts) for v in fields]

            def irq(it: Iterator[int], ft: Iterator[float]) -> Any:
                values = [p(it, ft) for p in parts]
                values[-1] += sum(values[-2])  # total was stored as its difference from the counts
                return cls(*values)
            return irq
        if fields and all(type(v) is int for v in fields):
            counts[0] += len(fields)
            return _counters(len(fields), cls)
        parts = [_compile(v, counts) for v in fields]
        return lambda it, ft: cls(*[p(it, ft) for p in parts])
    keys, values = node["k"], node["v"]
    if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
        raise TypeError("a mapping's keys and values do not pair up")
    hash(tuple(keys))  # TypeError now for a key that cannot be one
    parts = [_compile(v, counts) for v in values]
    return lambda it, ft: dict(zip(keys, [p(it, ft) for p in parts]))


# --- vectors -------------------------------------------------------------------------


# First byte of an int blob: 1 zlib'd zigzag varints; 2 the same in LZMA2; 3 LZMA2 of
# zigzag byte planes, written by format 1; 4 LZMA2 of trimmed byte planes (_planes),
# written by format 2 (a format-1 reader does not know 4 and skips the row instead of
# misreading it).
ZLIB, LZMA, LZMA_PLANES, LZMA_PLANES_2 = 1, 2, 3, 4
PLANE_TAGS = (bytes([LZMA_PLANES]), bytes([LZMA_PLANES_2]))
# LZMA2 raw stream without literal context: counter deltas are not text, and lc=0 is
# both smaller and faster here. Other tools decode it with xz's raw mode and these values.
LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 16, "lc": 0, "lp": 0, "pb": 0,
                 "mode": lzma.MODE_NORMAL, "nice_len": 273, "mf": lzma.MF_BT4}] if lzma else None
# The encoder's search for vectors of BIG_VECTOR values or more (a 1,024-CPU host has
# ~560,000): the normal mode's binary-tree search took 660 ms for a key sample there and
# 1.9 ms for each ~16 kB sample between, the fast mode's hash chains 17 and 0.1 ms, for
# a few percent more bytes. Smaller hosts keep the normal mode (a 64-CPU host's 24 h
# grew 97 -> 104 MB with the fast one). mode, nice_len and mf are the encoder's own:
# the stream is decoded with LZMA_FILTERS either way.
BIG_VECTOR = 1 << 16
LZMA_FAST_FILTERS = [{**LZMA_FILTERS[0], "mode": lzma.MODE_FAST, "mf": lzma.MF_HC4}] if LZMA_FILTERS else None


def _lzma_planes(planes: bytes, n: int) -> bytes:
    """Format 2's blob of a vector of n values from its byte planes (_planes)."""
    filters = LZMA_FAST_FILTERS if n >= BIG_VECTOR else LZMA_FILTERS
    return bytes([LZMA_PLANES_2]) + lzma.compress(planes, format=lzma.FORMAT_RAW, filters=filters)


class Order:
    """Storage order of a chain's counters: the positions that moved first, then the rest.

    Counters that moved in a chain's first interval (key sample -> next sample) almost
    always move again and the others almost never do, so this puts the noisy values
    together and leaves one long run of zeros, which compresses to nearly nothing (a
    third smaller than walk order). Format 2 also sorts the moved ones by the size of
    that first step, largest first: a counter's prediction error grows with its rate, so
    neighbours in storage then have errors of similar size, which LZMA's adaptive byte
    model codes about 6 % smaller, and the high byte planes end early (_planes).
    Built once per chain; applying it is C-speed.
    """

    __slots__ = ("fwd", "_inv", "_moved", "_rest", "_perm", "_place", "n")

    def __init__(self, n: int, moved: list[int]) -> None:
        self.n = n
        # the positions after the moved ones keep walk order: a mask for itertools.compress
        # instead of an index per position, so a 1,024-CPU chain's order holds the few
        # thousand moved positions, not ~550,000 Python ints (~25 MB the recorder held)
        rest = bytearray(b"\x01") * n
        for i in moved:
            rest[i] = 0
        self._moved = moved
        self._rest = bytes(rest)
        self._inv: Callable[[Any], tuple] | None = None
        self._perm: Any = None
        self._place: tuple[Any, Any] | None = None  # (moved positions sorted, their ranks): `place`
        self.fwd: Callable[[Any], tuple] | None = self._forward if n > 1 else None

    def _forward(self, values: Any) -> tuple:
        """`values` in storage order (C-level: one itemgetter, one compress)."""
        moved = self._moved
        if not moved:
            return tuple(values)
        head = operator.itemgetter(*moved)(values)
        return ((head,) if len(moved) == 1 else head) + tuple(compress(values, self._rest))

    @property
    def inv(self) -> Callable[[Any], tuple] | None:
        """The inverse permutation, built when first asked: a reader needs it, the Writer
        never does (at 1,024 CPUs it is ~20 MB of Python ints the recorder need not hold)."""
        if self._inv is None and self.n > 1:
            inverse = [0] * self.n
            for pos, i in enumerate(chain(self._moved, compress(range(self.n), self._rest))):
                inverse[i] = pos
            self._inv = operator.itemgetter(*inverse)
        return self._inv

    def perm(self) -> Any:
        """`fwd` as a numpy index array (`vector[order.perm()]`), built when first asked:
        the Writer's array path (~4.5 MB at 1,024 CPUs, where `fwd` makes a tuple of
        ~560,000 Python ints every sample)."""
        if self._perm is None:
            np = numpy()
            # intp, numpy's own index type: `take` converts any other to it on every call,
            # a fresh ~4.5 MB array a sample at 1,024 CPUs (~1,100 page faults)
            rest = np.flatnonzero(np.frombuffer(self._rest, dtype=np.uint8))
            self._perm = np.concatenate([np.array(self._moved, dtype=np.intp), rest.astype(np.intp, copy=False)])
        return self._perm

    def place(self, walk: Any) -> Any:
        """The storage positions of walk positions `walk` (an int array): where
        `vector[order.perm()]` puts them. A moved position goes to its rank among the
        moved ones, any other to the number of moved ones plus its walk position less
        the moved positions before it. The Writer places only a sample's non-zero
        differences (a few thousand of ~560,000 at 1,024 CPUs), not the whole vector."""
        np = numpy()
        walk = np.asarray(walk, dtype=np.intp)
        if self._place is None:
            moved = np.array(self._moved, dtype=np.intp)
            by_pos = np.argsort(moved, kind="stable")
            self._place = moved[by_pos], by_pos
        at, rank = self._place
        m = len(at)
        if not m:
            return walk
        j = np.searchsorted(at, walk)  # moved positions before each
        hit = at[np.minimum(j, m - 1)] == walk
        return np.where(hit, rank[np.minimum(j, m - 1)], m + walk - j)

    @classmethod
    def between_arrays(cls, a: Any, b: Any) -> Order:
        """`between(a, b, by_size=True)` of two int64 arrays whose values are `small_vector`
        (so no step overflows): the same order, without a Python int per value."""
        np = numpy()
        moved = np.flatnonzero(a != b)
        step = np.abs(b[moved] - a[moved])
        return cls(len(b), moved[np.lexsort((moved, -step))].tolist())

    @classmethod
    def between(cls, a: list[int], b: list[int], by_size: bool = False) -> Order:
        """The order of a chain whose first two samples are `a` and `b`; `by_size` for
        format 2 (moved positions by |step| descending, ties by position), else format 1."""
        moved = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if by_size:
            moved.sort(key=lambda i: (-abs(b[i] - a[i]), i))
        return cls(len(b), moved)


def pack_ints(values: list[int], base: list[int] | None = None, base2: list[int] | None = None,
              order: Order | None = None) -> bytes:
    """Compressed zigzag differences of `values` from a prediction (see store.py):
    none, `base`, or the line `2*base - base2`; in `order` when given."""
    if base is None:
        diffs = values
    elif len(base) != len(values) or (base2 is not None and len(base2) != len(values)):
        raise CodecError("base vector of another length")
    elif base2 is None:
        diffs = [v - p for v, p in zip(values, base)]
    else:
        diffs = [v - 2 * p + q for v, p, q in zip(values, base, base2)]
    if order is not None and order.fwd is not None:
        if order.n != len(diffs):
            raise CodecError("order of another length")
        diffs = list(order.fwd(diffs))
    zs = [d << 1 if d >= 0 else ((-d) << 1) - 1 for d in diffs]
    if LZMA_FILTERS is not None and (not zs or max(zs) < 1 << 64):
        return _lzma_planes(_planes(zs), len(zs))
    out = bytearray()
    append = out.append
    for z in zs:
        while z > 0x7F:
            append((z & 0x7F) | 0x80)
            z >>= 7
        append(z)
    return bytes([ZLIB]) + zlib.compress(bytes(out), 6)


SMALL = 1 << 61  # values in [-SMALL, SMALL): any prediction's difference fits a signed 64 bits


def small_vector(v: Any) -> bool:
    """`small` of an int64 array: every value within ±SMALL (-2**61 <= x < 2**61)."""
    return not len(v) or (int(v.min()) >= -SMALL and int(v.max()) < SMALL)


def pack_diffs(d: Any, work: tuple[Any, Any] | None = None) -> bytes:
    """`pack_ints`' blob, byte for byte, from the differences themselves: an int64 array,
    already in storage order, every value in (-2**63, 2**63) (a prediction from and into
    `small_vector` values: |v - 2p + q| < 4 * 2**61). The Writer's array path: numpy
    does per value what `pack_ints` does with a Python int per value.

    Zigzag is (d << 1) ^ (d >> 63) on the 64-bit pattern: the shift may wrap, which is
    what the unsigned zigzag of such a d is.

    `work`: two int64 arrays of d's length to compute in, the second of which may be d
    itself (it is overwritten): a Writer's, so a sample allocates no big array."""
    if LZMA_FILTERS is None:
        raise CodecError("this Python has no lzma; use pack_ints")
    np = numpy()
    d = np.asarray(d, dtype=np.int64)
    n = len(d)
    # only up to the last non-zero difference: storage order leaves the counters that
    # never move at the end (at 1,024 CPUs ~10,000 of ~560,000 values come before it),
    # so the zigzag is done on that head only; the rest are zero planes' bytes, which
    # _planes cuts anyway. argmax of a bool stops at the first True.
    moved = np.not_equal(d, 0, out=work[0].view(np.bool_)[:n] if work is not None else None)
    zeros_after = int(np.argmax(moved[::-1])) if n else 0
    end = n - zeros_after if n and moved[n - 1 - zeros_after] else 0
    return _pack_head(d[:end], n, work)


def pack_ordered(d: Any, order: Order, scratch: Any = None) -> bytes:
    """`pack_diffs(d[order.perm()])`, byte for byte, from differences `d` in walk order
    (int64, values as `pack_diffs` takes them): only the non-zero ones are placed in
    storage order (`Order.place`), into a head of zeros that ends at the last of them.
    A chain's sample at 1,024 CPUs has a few thousand non-zero differences of ~560,000:
    permuting all of them (a `take`) and then searching the result for its last non-zero
    value read and wrote the whole vector three times more.

    `scratch`: an int64 array of d's length to compute in; then `d` is overwritten (the
    head is built in it) and no big array is allocated (the Writer's buffers)."""
    if LZMA_FILTERS is None:
        raise CodecError("this Python has no lzma; use pack_ints")
    np = numpy()
    n = len(d)
    # nonzero of an int64 array is ~15x slower than a comparison and nonzero of its bools
    nz = np.flatnonzero(np.not_equal(d, 0, out=scratch.view(np.bool_)[:n] if scratch is not None else None))
    return _pack_placed(nz, d[nz], n, order, (scratch, d) if scratch is not None else None)


def pack_steps(step: Any, last: Any, order: Order, work: tuple[Any, Any]) -> bytes:
    """`pack_ordered(step - last, order)`, byte for byte, without making the differences:
    a straight-line prediction's difference v - 2p + q is the sample's step from its base
    (v - p) less its base's step (p - q), which the Writer kept from the last sample, so
    the non-zero ones are where the two steps differ. At 1,024 CPUs making v - 2p + q was
    three passes over ~560,000 int64 values (4.5 MB each), ~0.5-1 ms a sample on a VM.
    Both are int64 arrays in walk order; the values wrap as `v - 2*p + q` does in int64.

    `work`: two int64 arrays of step's length to compute in; the second may be `last`
    (it is overwritten)."""
    np = numpy()
    n = len(step)
    nz = np.flatnonzero(np.not_equal(step, last, out=work[0].view(np.bool_)[:n]))
    return _pack_placed(nz, step[nz] - last[nz], n, order, work)


def _pack_placed(nz: Any, values: Any, n: int, order: Order, work: tuple[Any, Any] | None) -> bytes:
    """The blob of n differences in walk order that are 0 but at walk positions `nz`
    (ascending), where they are `values` (int64): those are placed in storage order
    (`Order.place`), into a head of zeros that ends at the last of them. `work`: two int64
    arrays of n; the head is built in the second (overwritten). None: one is allocated."""
    np = numpy()
    if not len(nz):
        return _pack_head(values, n, None)  # empty
    pos = order.place(nz)
    end = int(pos.max()) + 1
    head = work[1][:end] if work is not None else np.zeros(end, dtype=np.int64)
    head.fill(0)
    head[pos] = values
    return _pack_head(head, n, (work[0], head) if work is not None else None)


def _pack_head(head: Any, n: int, work: tuple[Any, Any] | None) -> bytes:
    """The blob of n differences (int64, in storage order) of which `head` holds the
    first and the rest are 0. With `work` (two int64 arrays of at least len(head), the
    second of which may be `head`, which is then overwritten) no array is allocated."""
    np = numpy()
    end = len(head)
    if work is None:
        z = ((head << 1) ^ (head >> 63)).view(np.uint64)
    else:
        a, b = work[0][:end], work[1][:end]
        np.left_shift(head, 1, out=a)
        np.right_shift(head, 63, out=b)
        z = np.bitwise_xor(a, b, out=a).view(np.uint64)
    return _lzma_planes(_planes_of_words(z, n), n)


def _planes(zs: list[int]) -> bytes:
    """Byte planes, each cut after its last non-zero byte (format 2; LZMA_PLANES_2):
    width w (1 byte), count n (4 bytes LE), w plane lengths (4 bytes LE each), then plane
    0 (byte 0 of every value), plane 1, ... Missing bytes are zero.

    High planes are mostly zero and cost almost nothing; cut short (a chain's counters
    are stored largest step first, so a high plane ends early) they also cost nothing to
    decode. Decoding is slicing and one conversion, never a loop over values."""
    return _planes_of(_u64(zs), len(zs))


def _planes_of(raw: bytes, n: int) -> bytes:
    """`_planes` of n zigzag values given as little-endian 64-bit words (`raw` may stop
    after the last non-zero one; the rest are zero): w is the index
    of the highest plane with a non-zero byte, plus one (1 when all are zero), which is
    the byte length of the largest value."""
    planes = [raw[k::8].rstrip(b"\x00") for k in range(8)]
    width = max((k + 1 for k in range(8) if planes[k]), default=1)
    return _plane_blob(planes[:width], n)


def _plane_blob(planes: list[bytes], n: int) -> bytes:
    """Format 2's payload: the width (how many planes), n, each plane's length, the planes."""
    return struct.pack(f"<BI{len(planes)}I", len(planes), n, *map(len, planes)) + b"".join(planes)


def _planes_of_words(z: Any, n: int) -> bytes:
    """`_planes_of` from the zigzag values themselves (a uint64 array, the first of n):
    byte k of every value is column k of the array seen as bytes, cut after its last
    non-zero one, and only the planes below the largest value's width are looked at.
    A chain's key and its successor at 1,024 CPUs hold ~560,000 values: slicing their
    4.5 MB of bytes eight ways and stripping each plane's zeros was ~20 ms of each."""
    np = numpy()
    m = len(z)
    width = max(1, (int(z.max()).bit_length() + 7) // 8 if m else 1)
    cols = z.astype("<u8", copy=False).view(np.uint8).reshape(m, 8)
    planes = []
    for k in range(width):
        moved = cols[::-1, k] != 0  # from the end: argmax stops at the first True
        last = int(moved.argmax()) if m else 0
        planes.append(cols[:m - last, k].tobytes() if m and moved[last] else b"")
    return _plane_blob(planes, n)


def _lane_bytes(kind: int, data: bytes) -> tuple[bytearray, int]:
    """(little-endian 64-bit lanes of the zigzag values, as far as any is non-zero; n)
    from a plane payload of format 1 (LZMA_PLANES: w, then w full planes) or 2."""
    if not data:
        raise CodecError("counter planes are empty")
    width = data[0]
    if not 1 <= width <= 8:
        raise CodecError("counter planes are damaged")
    if kind == LZMA_PLANES:
        body = data[1:]
        if len(body) % width:
            raise CodecError("counter planes are damaged")
        n = len(body) // width
        lengths = [n] * width
        pos = 1
    else:
        if len(data) < 5 + 4 * width:
            raise CodecError("counter planes are damaged")
        n, *lengths = struct.unpack_from(f"<I{width}I", data, 1)
        pos = 5 + 4 * width
        if n > MAX_VALUES or any(ln > n for ln in lengths) or pos + sum(lengths) != len(data):
            raise CodecError("counter planes are damaged")
    m = max(lengths)
    buf = bytearray(8 * m)
    for k, ln in enumerate(lengths):
        buf[k:8 * ln:8] = data[pos:pos + ln]
        pos += ln
    return buf, n


def _unplanes(kind: int, data: bytes) -> list[int]:
    buf, n = _lane_bytes(kind, data)
    arr = array.array("Q")
    arr.frombytes(bytes(buf))
    if sys.byteorder != "little":
        arr.byteswap()  # pragma: no cover
    out = [z >> 1 if not z & 1 else -((z + 1) >> 1) for z in arr]
    return out + [0] * (n - len(out))


def unpack_ints(blob: bytes, base: list[int] | None = None, base2: list[int] | None = None,
                order: Order | None = None) -> list[int]:
    """The inverse of `pack_ints` given the same prediction inputs and order."""
    kind, raw = _decompress(blob)
    out = _varints(raw) if kind == _VARINTS else _unplanes(kind, raw)
    if order is not None and order.inv is not None:
        if order.n != len(out):
            raise CodecError("counter vector does not match its order")
        out = list(order.inv(out))
    if base is None:
        return out
    if len(base) != len(out) or (base2 is not None and len(base2) != len(out)):
        raise CodecError("counter vector does not match its base")
    if base2 is None:
        return [p + d for p, d in zip(base, out)]
    return [2 * p - q + d for p, q, d in zip(base, base2, out)]


MAX_VALUES = 1 << 24  # ints in one snapshot: a 256-CPU host with 4096 IRQs has ~1.1 M
_VARINTS = 0  # what _decompress says of a payload of LEB128 varints (blob type 1 or 2)


def _decompress(blob: bytes) -> tuple[int, bytes]:
    """(_VARINTS, or the plane layout LZMA_PLANES / LZMA_PLANES_2; the payload)."""
    tag = blob[:1]
    try:
        if tag == bytes([ZLIB]):
            z = zlib.decompressobj()
            raw = z.decompress(blob[1:], _MAX_RAW)
            if not z.eof:
                raise CodecError("compressed counters are damaged: truncated, or inflate beyond any sample")
            return _VARINTS, raw
        if LZMA_FILTERS is not None and (tag == bytes([LZMA]) or tag in PLANE_TAGS):
            kind = _VARINTS if tag == bytes([LZMA]) else tag[0]
            x = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)
            raw = x.decompress(blob[1:], _MAX_RAW)
            if not x.eof:
                raise CodecError("compressed counters are damaged: truncated, or inflate beyond any sample")
            return kind, raw
    except (zlib.error, lzma.LZMAError if lzma else zlib.error) as exc:
        raise CodecError(f"compressed counters are damaged: {exc}") from None
    raise CodecError("counters use an unknown compression")


# The most a sample's counters can take uncompressed (10 bytes per varint, 8 per plane
# value): a damaged or hostile blob that inflates beyond it is refused, not held.
_MAX_RAW = 10 * MAX_VALUES + 64


def _varints(raw: bytes) -> list[int]:
    out: list[int] = []
    append = out.append
    z = shift = 0
    for b in raw:
        z |= (b & 0x7F) << shift
        if b & 0x80:
            shift += 7
            continue
        append(z >> 1 if not z & 1 else -((z + 1) >> 1))
        z = shift = 0
    if shift:
        raise CodecError("counter vector ends mid-value")
    return out


# --- lanes: a whole vector as one Python int ---------------------------------------
#
# Replaying a chain means adding every sample's differences to its prediction,
# thousands of ints per sample, a hundred or more samples per seek. Done with Python
# lists that is ~1.5 ms a sample; done on one big int whose 64-bit "lanes" are the
# vector's values it is a few C-speed big-int operations (~0.03 ms). A lane holds
# v + 2**63, so every value in [-2**63, 2**63) fits; a straight-line prediction
# 2*p - q + d keeps that bias, and as long as the true values fit, no carry ever
# crosses a lane. Writers of format 2 make any sample whose values do not fit, and the
# one after it, a key sample stored with plain lists (`fits`).


@functools.lru_cache(maxsize=8)
def _lane_masks(n: int) -> tuple[int, int, int]:
    """(1 in each of n lanes, 2**63 in each lane, 2**63 - 1 in each lane)."""
    ones = int.from_bytes(b"\x01\x00\x00\x00\x00\x00\x00\x00" * n, "little")
    return ones, ones << 63, ones * ((1 << 63) - 1)


def fits(values: list[int]) -> bool:
    """Whether every value is a signed 64-bit int, so the vector can live in lanes."""
    try:
        array.array("q", values)
    except OverflowError:
        return False
    return True


def lanes(values: Any) -> int:
    """A sequence of ints as one lanes int; OverflowError if one does not fit 64 bits."""
    arr = array.array("q", values)
    if sys.byteorder != "little":
        arr.byteswap()  # pragma: no cover
    return int.from_bytes(arr.tobytes(), "little") ^ _lane_masks(len(arr))[1]


def unlanes(packed: int, n: int) -> list[int]:
    """The n values of a lanes int; CodecError if it cannot be one (damaged input)."""
    try:
        raw = (packed ^ _lane_masks(n)[1]).to_bytes(8 * n, "little")
    except OverflowError:
        raise CodecError("counter vector is out of range") from None
    arr = array.array("q")
    arr.frombytes(raw)
    if sys.byteorder != "little":
        arr.byteswap()  # pragma: no cover
    return arr.tolist()


def residual(blob: bytes) -> tuple[int, int]:
    """(the blob's differences as one int, sum of d_i * 2**(64*i), and their count n).

    Lanes of the result may be negative; adding it to a lanes prediction gives the lanes
    of the values. From byte planes this never makes a Python int per value: the
    zigzag values become one int, and z -> d (z/2, or -(z+1)/2 when z is odd) is done on
    all lanes at once: with h = z >> 1 per lane and l = z & 1 per lane, d = h - 2*h*l - l.
    """
    kind, raw = _decompress(blob)
    if kind == _VARINTS:
        ds = _varints(raw)
        pos = [d if d > 0 else 0 for d in ds]
        neg = [-d if d < 0 else 0 for d in ds]
        try:
            return (int.from_bytes(_u64(pos), "little") - int.from_bytes(_u64(neg), "little")), len(ds)
        except OverflowError:  # a difference of 64 bits or more: rare, slow and exact
            return sum(d << (64 * i) for i, d in enumerate(ds)), len(ds)
    buf, n = _lane_bytes(kind, raw)
    z = int.from_bytes(buf, "little")  # lanes past the last non-zero byte are zero
    ones, _, low63 = _lane_masks(n)
    h = (z >> 1) & low63
    odd = z & ones
    return h - 2 * (h & (odd * ((1 << 63) - 1))) - odd, n


def _u64(values: list[int]) -> bytes:
    arr = array.array("Q", values)
    if sys.byteorder != "little":
        arr.byteswap()  # pragma: no cover
    return arr.tobytes()


def predict_lanes(pred: int, d: int, n: int, p: int | None = None, q: int | None = None) -> int:
    """Lanes of a sample from its residual `d`: absolute (pred 0), `p + d` (1) or
    `2p - q + d` (2), with p, q the lanes of its base and its base's base."""
    if pred == 0:
        return d + _lane_masks(n)[1]
    if pred == 1 and p is not None:
        return p + d
    if pred == 2 and p is not None and q is not None:
        return 2 * p - q + d
    raise CodecError("sample has no usable base")


def pack_floats(values: list[float]) -> bytes:
    """Formats 1-3: the doubles as they are."""
    return struct.pack(f"<{len(values)}d", *values)


def unpack_floats(blob: bytes) -> list[float]:
    if len(blob) % 8:
        raise CodecError("float vector has a partial value")
    return list(struct.unpack(f"<{len(blob) // 8}d", blob))


# Format 4: a float blob's first byte says how the doubles follow. A 1,024-CPU sample
# has ~2,000 floats, nearly all the `read_at` of settings read in the same few ticks:
# 16 kB a sample (1.4 GB a day) as they are, ~120 bytes through zlib.
FLOATS_RAW, FLOATS_ZLIB = 0, 1


def pack_floats_tagged(values: list[float]) -> bytes:
    """Format 4: zlib'd doubles when that is smaller, else the doubles; after a tag byte.
    Either way the blob is never 8k bytes long, so a format-3 reader fails it ("partial
    value") or finds the wrong count, and skips the sample rather than misread it."""
    raw = pack_floats(values)
    packed = zlib.compress(raw, 6)
    if len(packed) < len(raw):
        return bytes([FLOATS_ZLIB]) + packed
    return bytes([FLOATS_RAW]) + raw


def unpack_floats_tagged(blob: bytes) -> list[float]:
    tag, body = blob[:1], blob[1:]
    if tag == bytes([FLOATS_RAW]):
        return unpack_floats(body)
    if tag != bytes([FLOATS_ZLIB]):
        raise CodecError("float vector uses an unknown encoding")
    z = zlib.decompressobj()
    try:
        raw = z.decompress(body, 8 * MAX_VALUES)
    except zlib.error as exc:
        raise CodecError(f"compressed floats are damaged: {exc}") from None
    if not z.eof or z.unused_data:
        raise CodecError("compressed floats are damaged: truncated, trailing bytes, or beyond any sample")
    return unpack_floats(raw)
