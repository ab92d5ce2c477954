"""The running kernel's own type information (BTF), read from /sys/kernel/btf/vmlinux.

bcc compiles nettop's probes against whatever kernel headers are installed, and those
may be older than the running kernel (Debian's 6.1 headers on a 6.18 kernel), so the
probes must not take struct layouts from the headers. Instead the few offsets they need
(`napi_struct.napi_id`, `net_device.name`, `sk_buff.dev`, ...) come from the running
kernel's BTF and are handed to the compiler as constants. BTF also answers which
tracepoints exist (every tracepoint has a `btf_trace_<name>` typedef, with the
arguments of its raw form) and the names of `enum skb_drop_reason` — with no tracefs
mount and no debug symbols.

`parse_btf` is a pure function over the raw bytes; `read_vmlinux_btf` is the thin
cached reader. One linear pass keeps only names and record positions; members and
enum values are decoded when asked for.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

VMLINUX = "/sys/kernel/btf/vmlinux"

_MAGIC = 0xEB9F
# Kinds (include/uapi/linux/btf.h)
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF = 1, 2, 3, 4, 5, 6, 7, 8
VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR, DATASEC = 9, 10, 11, 12, 13, 14, 15
FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = 16, 17, 18, 19
# Bytes after the 12-byte common header: fixed part, and per-vlen-entry part.
_EXTRA = {INT: (4, 0), ARRAY: (12, 0), STRUCT: (0, 12), UNION: (0, 12), ENUM: (0, 8),
          FUNC_PROTO: (0, 8), VAR: (4, 0), DATASEC: (0, 12), DECL_TAG: (4, 0),
          ENUM64: (0, 12)}
_MODIFIERS = (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG)


class BtfError(ValueError):
    """The BTF blob is not what the kernel documents (bad magic, truncated)."""


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    type_id: int
    bit_offset: int
    bitfield_size: int  # 0 for a whole member


class Btf:
    """Types of one BTF blob; look-ups by name decode only what they touch."""

    __slots__ = ("_data", "_types", "_strs", "_kinds", "_rec", "_by_name")

    def __init__(self, data: bytes, types_off: int, strs_off: int, strs_len: int,
                 kinds: list[int], rec: list[int], by_name: dict[tuple[int, str], int]) -> None:
        self._data = data
        self._types = types_off
        self._strs = (strs_off, strs_len)
        self._kinds = kinds
        self._rec = rec
        self._by_name = by_name

    def _str(self, off: int) -> str:
        base, size = self._strs
        if off >= size:
            return ""
        end = self._data.index(b"\0", base + off)
        return self._data[base + off:end].decode("ascii", "replace")

    def _header(self, tid: int) -> tuple[int, int, int]:
        """(name_off, info, size_or_type) of type `tid`."""
        return struct.unpack_from("<III", self._data, self._rec[tid])

    def kind(self, tid: int) -> int:
        return self._kinds[tid]

    def find(self, kind: int, name: str) -> int | None:
        """Type id of the named type of `kind` (a full definition, not a forward)."""
        return self._by_name.get((kind, name))

    def name(self, tid: int) -> str:
        return self._str(self._header(tid)[0]) if tid else "void"

    def resolve(self, tid: int) -> int:
        """Skip typedefs, const, volatile and type tags."""
        while tid and self._kinds[tid] in _MODIFIERS:
            tid = self._header(tid)[2]
        return tid

    def members(self, tid: int) -> list[Member]:
        """Members of a struct or union, in declaration order."""
        _, info, _ = self._header(tid)
        kflag = info >> 31
        out = []
        pos = self._rec[tid] + 12
        for i in range(info & 0xFFFF):
            name_off, mtype, off = struct.unpack_from("<III", self._data, pos + 12 * i)
            if kflag:
                out.append(Member(self._str(name_off), mtype, off & 0xFFFFFF, off >> 24))
            else:
                out.append(Member(self._str(name_off), mtype, off, 0))
        return out

    def member_offset(self, struct_name: str, path: str) -> int | None:
        """Byte offset of `path` ("dev" or "nd_net.net": members of embedded structs,
        never through pointers) in `struct struct_name`, looking inside anonymous
        structs and unions (sk_buff keeps `dev` in one); None when absent."""
        tid = self.find(STRUCT, struct_name)
        bits = 0
        for part in path.split("."):
            if tid is None or self._kinds[tid] not in (STRUCT, UNION):
                return None
            found = self._member(tid, part)
            if found is None:
                return None
            bits += found[0]
            tid = self.resolve(found[1])
        return bits // 8

    def _member(self, tid: int, member: str) -> tuple[int, int] | None:
        """(bit offset, type id) of a member, searching anonymous members too."""
        for m in self.members(tid):
            if m.name == member:
                return m.bit_offset, m.type_id
            if not m.name:
                inner = self.resolve(m.type_id)
                if self._kinds[inner] in (STRUCT, UNION):
                    sub = self._member(inner, member)
                    if sub is not None:
                        return m.bit_offset + sub[0], sub[1]
        return None

    def enum_values(self, name: str) -> dict[int, str]:
        """Value -> name of `enum name` (ENUM or ENUM64)."""
        tid = self.find(ENUM, name)
        if tid is None:
            tid = self.find(ENUM64, name)
        if tid is None:
            return {}
        _, info, _ = self._header(tid)
        signed = bool(info >> 31)
        pos = self._rec[tid] + 12
        out: dict[int, str] = {}
        if self._kinds[tid] == ENUM:
            fmt = "<Ii" if signed else "<II"
            for i in range(info & 0xFFFF):
                name_off, val = struct.unpack_from(fmt, self._data, pos + 8 * i)
                out[val] = self._str(name_off)
        else:
            for i in range(info & 0xFFFF):
                name_off, lo, hi = struct.unpack_from("<III", self._data, pos + 12 * i)
                out[(hi << 32) | lo] = self._str(name_off)
        return out

    def tracepoint_args(self, tracepoint: str) -> list[str] | None:
        """Argument types of a raw tracepoint as C-ish names ("struct napi_struct *",
        "int", "enum skb_drop_reason"), without the leading `void *` context; None when
        the kernel has no such tracepoint."""
        tid = self.find(TYPEDEF, f"btf_trace_{tracepoint}")
        if tid is None:
            return None
        ptr = self.resolve(tid)
        if self._kinds[ptr] != PTR:
            return None
        proto = self.resolve(self._header(ptr)[2])
        if self._kinds[proto] != FUNC_PROTO:
            return None
        _, info, _ = self._header(proto)
        pos = self._rec[proto] + 12
        params = [struct.unpack_from("<II", self._data, pos + 8 * i)[1]
                  for i in range(info & 0xFFFF)]
        return [self.type_str(p) for p in params[1:]]

    def type_str(self, tid: int) -> str:
        tid = self.resolve(tid)
        kind = self._kinds[tid] if tid else 0
        if kind == PTR:
            return self.type_str(self._header(tid)[2]) + " *"
        prefix = {STRUCT: "struct ", UNION: "union ", ENUM: "enum ", ENUM64: "enum ",
                  FWD: "struct "}.get(kind, "")
        return prefix + self.name(tid)


def parse_btf(data: bytes) -> Btf:
    """Index a BTF blob (the format of /sys/kernel/btf/vmlinux); raises BtfError."""
    if len(data) < 24:
        raise BtfError("BTF blob is shorter than its header")
    magic, _ver, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
    if magic != _MAGIC:
        raise BtfError(f"bad BTF magic {magic:#x}")
    type_off, type_len, str_off, str_len = struct.unpack_from("<IIII", data, 8)
    types = hdr_len + type_off
    strs = hdr_len + str_off
    if types + type_len > len(data) or strs + str_len > len(data):
        raise BtfError("BTF sections run past the end of the blob")
    kinds = [0]
    rec = [0]
    by_name: dict[tuple[int, str], int] = {}
    wanted_kinds = (STRUCT, UNION, ENUM, ENUM64, TYPEDEF)
    unpack = struct.Struct("<II").unpack_from
    pos, end, tid = types, types + type_len, 0
    while pos < end:
        tid += 1
        name_off, info = unpack(data, pos)
        kind = (info >> 24) & 0x1F
        kinds.append(kind)
        rec.append(pos)
        fixed, per = _EXTRA.get(kind, (0, 0))
        if kind in wanted_kinds and name_off:
            key_name = data[strs + name_off:data.index(b"\0", strs + name_off)]
            by_name.setdefault((kind, key_name.decode("ascii", "replace")), tid)
        pos += 12 + fixed + per * (info & 0xFFFF)
    if pos != end:
        raise BtfError("BTF type section ends inside a type record")
    return Btf(data, types, strs, str_len, kinds, rec, by_name)


@functools.lru_cache(maxsize=2)
def read_vmlinux_btf(path: str = VMLINUX) -> Btf:
    """The running kernel's BTF (cached: it does not change while the kernel runs).
    Raises OSError when the file is missing (kernel built without CONFIG_DEBUG_INFO_BTF)
    and BtfError when it cannot be parsed."""
    with open(path, "rb") as f:
        return parse_btf(f.read())
