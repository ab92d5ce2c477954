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
import json
import operator
import struct
import sys
import zlib

try:
    import lzma
except ImportError:  # a Python built without liblzma still reads and writes zlib rows
    lzma = None  # type: ignore[assignment]
from typing import Any

import enum
import types

from nettop import snapshot as S
from nettop.ebpf import sample as E
from nettop.ping.stats import LatencyStats
from nettop.problems import Problem


def _registry(module: types.ModuleType, prefix: str) -> dict[str, type]:
    return {prefix + name: obj for name, obj in vars(module).items()
            if isinstance(obj, type) and obj.__module__ == module.__name__
            and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))}


# The only types a recording can produce: snapshot.py's and the eBPF sample's.
CLASSES: dict[str, type] = {
    **_registry(S, ""), **_registry(E, "ebpf."), "LatencyStats": LatencyStats, "Problem": Problem,
}
_IRQ_HEAD = ("irq", "chip", "hwirq", "name", "counts")  # Irq's fields before `total`
_NAMES: dict[type, str] = {c: n for n, c in CLASSES.items()}
_FIELDS: dict[type, tuple[str, ...]] = {
    c: tuple(f.name for f in dataclasses.fields(c)) for c in CLASSES.values() if dataclasses.is_dataclass(c)
}


class CodecError(ValueError):
    """A row that cannot be turned back into a snapshot (corrupt or foreign)."""


def split(snap: S.Snapshot) -> tuple[str, list[int], list[float]]:
    """(skeleton JSON, ints, floats) of one snapshot."""
    ints: list[int] = []
    floats: list[float] = []
    tree = _enc(snap, ints, floats)
    return json.dumps(tree, separators=(",", ":")), ints, floats


def _enc(obj: Any, ints: list[int], floats: list[float]) -> Any:
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
    if cls is S.Irq and obj.counts is not None and isinstance(obj.total, int):
        # total is the sum of the per-CPU counts: store only what it differs by (0), so a
        # busy IRQ's noise is paid once, not twice
        head = [_enc(getattr(obj, n), ints, floats) for n in _IRQ_HEAD]
        ints.append(obj.total - sum(obj.counts))
        return {"c": "Irq", "f": head + [0], "t": 1}
    names = _FIELDS.get(cls)
    if names is not None:
        return {"c": _NAMES[cls], "f": [_enc(getattr(obj, n), ints, floats) for n in names]}
    if hasattr(obj, "items"):
        keys = list(obj.keys())
        return {"k": keys, "v": [_enc(obj[k], ints, floats) for k in keys]}
    raise CodecError(f"cannot record a value of type {cls.__name__}")


def join(skeleton: Any, ints: list[int], floats: list[float]) -> S.Snapshot:
    """The snapshot from a parsed skeleton and its vectors; CodecError if they disagree."""
    it, ft = iter(ints), iter(floats)
    try:
        snap = _dec(skeleton, it, ft)
    except (StopIteration, KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise CodecError(f"sample does not match its configuration: {exc}") from None
    if next(it, None) is not None or next(ft, None) is not None:
        raise CodecError("sample has more values than its configuration")
    if not isinstance(snap, S.Snapshot):
        raise CodecError("row is not a snapshot")
    return snap


def _dec(node: Any, it: Any, ft: Any) -> Any:
    if node is None or node is True or node is False or isinstance(node, str):
        return node
    if isinstance(node, int):
        return next(it)
    if isinstance(node, float):
        return next(ft)
    if isinstance(node, list):
        return tuple([_dec(v, it, ft) for v in node])
    if "e" in node:
        return CLASSES[node["e"]](node["v"])
    if "c" in node:
        cls = CLASSES[node["c"]]
        values = [_dec(v, it, ft) for v in node["f"]]
        if node.get("t") and cls is S.Irq:
            values[-1] += sum(values[-2])
        return cls(*values)
    return dict(zip(node["k"], [_dec(v, it, ft) for v in node["v"]]))


# --- vectors -------------------------------------------------------------------------


# First byte of an int blob: 1 zlib'd zigzag varints; 2 the same in LZMA2; 3 LZMA2 of
# zigzag byte planes (see _planes), the default.
ZLIB, LZMA, LZMA_PLANES = 1, 2, 3
# LZMA2 raw stream without literal context: counter deltas are not text, and lc=0 is
# both smaller and faster here. Other tools decode it with xz's raw mode and these values.
LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 16, "lc": 0, "lp": 0, "pb": 0,
                 "mode": lzma.MODE_NORMAL, "nice_len": 273, "mf": lzma.MF_BT4}] if lzma else None


class Order:
    """Storage order of a chain's counters: the positions that moved first, then the rest.

    Counters that moved in a chain's first interval (key sample -> next sample) almost
    always move again and the others almost never do, so this puts the noisy values
    together and leaves one long run of zeros, which compresses to nearly nothing (a
    third smaller than walk order). Built once per chain; applying it is C-speed.
    """

    __slots__ = ("fwd", "inv", "n")

    def __init__(self, n: int, moved: list[int]) -> None:
        self.n = n
        seen = set(moved)
        order = moved + [i for i in range(n) if i not in seen]
        inverse = [0] * n
        for pos, i in enumerate(order):
            inverse[i] = pos
        self.fwd = operator.itemgetter(*order) if n > 1 else None
        self.inv = operator.itemgetter(*inverse) if n > 1 else None

    @classmethod
    def between(cls, a: list[int], b: list[int]) -> Order:
        return cls(len(b), [i for i, (x, y) in enumerate(zip(a, b)) if x != y])


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
        return bytes([LZMA_PLANES]) + lzma.compress(_planes(zs), format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)
    out = bytearray()
    append = out.append
    for z in zs:
        while z > 0x7F:
            append((z & 0x7F) | 0x80)
            z >>= 7
        append(z)
    return bytes([ZLIB]) + zlib.compress(bytes(out), 6)


def _planes(zs: list[int]) -> bytes:
    """Byte planes: width w (1 byte), then byte 0 of every value, byte 1 of every value, ...

    Planes of high bytes are mostly zero and compress to almost nothing; decoding is
    slicing and one array conversion instead of a loop over every byte."""
    arr = array.array("Q", zs)
    if sys.byteorder != "little":
        arr.byteswap()  # pragma: no cover - the format is little-endian
    raw = arr.tobytes()
    top = max(zs, default=0)
    width = max(1, (top.bit_length() + 7) // 8)
    return bytes([width]) + b"".join(raw[k::8] for k in range(width))


def _unplanes(data: bytes) -> list[int]:
    if not data:
        raise CodecError("counter planes are empty")
    width = data[0]
    body = data[1:]
    if not 1 <= width <= 8 or len(body) % width:
        raise CodecError("counter planes are damaged")
    n = len(body) // width
    buf = bytearray(8 * n)
    for k in range(width):
        buf[k::8] = body[k * n:(k + 1) * n]
    arr = array.array("Q")
    arr.frombytes(bytes(buf))
    if sys.byteorder != "little":
        arr.byteswap()  # pragma: no cover
    return [z >> 1 if not z & 1 else -((z + 1) >> 1) for z in arr]


def unpack_ints(blob: bytes, base: list[int] | None = None, base2: list[int] | None = None,
                order: Order | None = None) -> list[int]:
    """The inverse of `pack_ints` given the same prediction inputs and order."""
    planes = blob[:1] == bytes([LZMA_PLANES])
    try:
        if blob[:1] == bytes([ZLIB]):
            raw = zlib.decompress(blob[1:])
        elif blob[:1] in (bytes([LZMA]), bytes([LZMA_PLANES])) and LZMA_FILTERS is not None:
            raw = lzma.decompress(blob[1:], format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)
        else:
            raise CodecError("counters use an unknown compression")
    except (zlib.error, lzma.LZMAError if lzma else zlib.error) as exc:
        raise CodecError(f"compressed counters are damaged: {exc}") from None
    out = _unplanes(raw) if planes else _varints(raw)
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


def pack_floats(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


def unpack_floats(blob: bytes) -> list[float]:
    if len(blob) % 8:
        raise CodecError("float vector has a partial value")
    return list(struct.unpack(f"<{len(blob) // 8}d", blob))
