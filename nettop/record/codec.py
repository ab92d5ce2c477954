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

import dataclasses
import json
import struct
import zlib
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
        return cls(*[_dec(v, it, ft) for v in node["f"]])
    return dict(zip(node["k"], [_dec(v, it, ft) for v in node["v"]]))


# --- vectors -------------------------------------------------------------------------


def pack_ints(values: list[int], base: list[int] | None) -> bytes:
    """zlib(zigzag varints of values - base); base None or of another length: absolute."""
    if base is not None and len(base) != len(values):
        raise CodecError("base vector of another length")
    out = bytearray()
    append = out.append
    prev = base if base is not None else [0] * len(values)
    for v, p in zip(values, prev):
        d = v - p
        z = d << 1 if d >= 0 else ((-d) << 1) - 1
        while z > 0x7F:
            append((z & 0x7F) | 0x80)
            z >>= 7
        append(z)
    return zlib.compress(bytes(out), 6)


def unpack_ints(blob: bytes, base: list[int] | None) -> list[int]:
    try:
        raw = zlib.decompress(blob)
    except zlib.error as exc:
        raise CodecError(f"compressed counters are damaged: {exc}") from None
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
    if base is not None:
        if len(base) != len(out):
            raise CodecError("counter vector does not match its base")
        out = [a + b for a, b in zip(base, out)]
    return out


def pack_floats(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


def unpack_floats(blob: bytes) -> list[float]:
    if len(blob) % 8:
        raise CodecError("float vector has a partial value")
    return list(struct.unpack(f"<{len(blob) // 8}d", blob))
