"""Reading the probes' kernel maps in as few system calls as possible.

Once per sampling interval every hash map is read with BPF_MAP_LOOKUP_BATCH into
buffers allocated once, and the per-CPU softirq record with one lookup; keys and values
are then unpacked from the raw bytes with `struct` formats that mirror the C structs in
program.py (a test checks the sizes against what bcc compiled). The `decode_*` functions
are pure: bytes in, tuples out.
"""

from __future__ import annotations

import ctypes as ct
import errno
import struct
from typing import Iterator

from nettop.ebpf.program import HIST_SLOTS

NAPI_KEY = struct.Struct("<Q")  # the napi_struct's address
# polls, work, full, empty, budget, napi_id, ifindex, irq, netns, seen, name (per CPU)
NAPI_VAL = struct.Struct("<4QIIIiII16s")
IRQ_KEY = struct.Struct("<II")  # irq, cpu
IRQ_VAL = struct.Struct("<QQ")  # count, ns
DROP_KEY = struct.Struct("<IIQQ")  # reason, pad, device address, location
DROP_VAL = struct.Struct("<QIIII16s")  # count, ifindex, netns, seen, pad, name (per CPU)
# struct sirq_cpu: 8 arrays of 2, then two [2][HIST_SLOTS] histograms.
SIRQ_FIELDS = ("raise_ts", "entry_ts", "raised", "runs", "run_ns", "waits", "wait_ns",
               "timed")
SIRQ_WORDS = len(SIRQ_FIELDS) * 2 + 2 * 2 * HIST_SLOTS
_NO_BATCH = {errno.EINVAL, errno.EOPNOTSUPP, 524}  # 524: the kernel's ENOTSUPP


def ifname(raw: bytes) -> str:
    """A kernel `char name[IFNAMSIZ]` as text ("" for none, "?" for garbage)."""
    name = raw.split(b"\0", 1)[0]
    if not name:
        return ""
    if not all(0x21 <= c < 0x7F for c in name):
        return "?"
    return name.decode("ascii")


def decode_pairs(keys: bytes, values: bytes, count: int, kfmt: struct.Struct,
                 vfmt: struct.Struct) -> Iterator[tuple[tuple, tuple]]:
    """(key fields, value fields) of the first `count` entries of batch buffers."""
    ks, vs = kfmt.size, vfmt.size
    for i in range(count):
        yield kfmt.unpack_from(keys, i * ks), vfmt.unpack_from(values, i * vs)


def decode_percpu_pairs(keys: bytes, values: bytes, count: int, kfmt: struct.Struct,
                        vfmt: struct.Struct, ncpus: int) -> Iterator[tuple[tuple, list]]:
    """(key fields, [value fields of each possible CPU]) of per-CPU map batch buffers;
    the kernel pads each CPU's value to 8 bytes."""
    ks = kfmt.size
    vs = (vfmt.size + 7) & ~7
    for i in range(count):
        base = i * vs * ncpus
        yield kfmt.unpack_from(keys, i * ks), [vfmt.unpack_from(values, base + c * vs)
                                                for c in range(ncpus)]


def decode_sirq(words: list[int], cpus: list[int]) -> dict[int, dict[str, tuple]]:
    """Per-CPU softirq records from one per-CPU lookup, flattened to u64 words.

    Returns {cpu: {"raised": (tx, rx), ..., "wait_hist": (tx_hist, rx_hist),
    "run_hist": (...)}}.
    """
    out: dict[int, dict[str, tuple]] = {}
    for n, cpu in enumerate(cpus):
        w = words[n * SIRQ_WORDS:(n + 1) * SIRQ_WORDS]
        if len(w) < SIRQ_WORDS:
            break
        rec: dict[str, tuple] = {name: (w[2 * i], w[2 * i + 1])
                                 for i, name in enumerate(SIRQ_FIELDS)}
        base = 2 * len(SIRQ_FIELDS)
        h = HIST_SLOTS
        rec["wait_hist"] = (tuple(w[base:base + h]), tuple(w[base + h:base + 2 * h]))
        base += 2 * h
        rec["run_hist"] = (tuple(w[base:base + h]), tuple(w[base + h:base + 2 * h]))
        out[cpu] = rec
    return out


class HashReader:
    """Reads a whole BPF hash map per call, reusing its buffers. With `ncpus` (a per-CPU
    hash) each value is a list with one tuple per possible CPU."""

    def __init__(self, lib, map_fd: int, kfmt: struct.Struct, vfmt: struct.Struct,
                 max_entries: int, ncpus: int = 0) -> None:
        self._lib = lib
        self._fd = map_fd
        self._kfmt, self._vfmt = kfmt, vfmt
        self.max_entries = max_entries
        self._max = max_entries
        self._ncpus = ncpus
        self._vsize = ((vfmt.size + 7) & ~7) * ncpus if ncpus else vfmt.size
        self._keys = (ct.c_char * (kfmt.size * max_entries))()
        self._vals = (ct.c_char * (self._vsize * max_entries))()
        self._batch_ok = True

    def delete(self, keys: list[tuple]) -> None:
        """Remove entries (by key fields) that are no longer worth their slot."""
        for key in keys:
            self._lib.bpf_delete_elem(self._fd, ct.create_string_buffer(
                self._kfmt.pack(*key), self._kfmt.size))

    def _decode(self, keys: bytes, values: bytes, n: int) -> list:
        if self._ncpus:
            return list(decode_percpu_pairs(keys, values, n, self._kfmt, self._vfmt,
                                            self._ncpus))
        return list(decode_pairs(keys, values, n, self._kfmt, self._vfmt))

    def read(self) -> list:
        if self._batch_ok:
            try:
                n = self._read_batch()
            except OSError as exc:
                if exc.errno not in _NO_BATCH:
                    raise
                self._batch_ok = False  # kernels before 5.6 have no batch ops
            else:
                return self._decode(self._keys.raw, self._vals.raw, n)
        return self._read_one_by_one()

    def _read_batch(self) -> int:
        token_in, token_out, count = ct.c_uint32(0), ct.c_uint32(0), ct.c_uint32(0)
        total = 0
        ks, vs = self._kfmt.size, self._vsize
        while total < self._max:
            count.value = self._max - total
            res = self._lib.bpf_lookup_batch(
                self._fd, ct.byref(token_in) if total else None, ct.byref(token_out),
                ct.byref(self._keys, ks * total), ct.byref(self._vals, vs * total),
                ct.byref(count))
            err = ct.get_errno() if res == -1 else -res
            total += count.value
            if res != 0:
                if err == errno.ENOENT:
                    break  # walked the whole map
                raise OSError(err, f"BPF_MAP_LOOKUP_BATCH: {errno.errorcode.get(err, err)}")
            if count.value == 0:
                break
            token_in.value = token_out.value
        return total

    def _read_one_by_one(self) -> list:
        keys, vals = [], []
        key = ct.create_string_buffer(self._kfmt.size)
        nxt = ct.create_string_buffer(self._kfmt.size)
        val = ct.create_string_buffer(self._vsize)
        first = True
        while self._lib.bpf_get_next_key(self._fd, None if first else key, nxt) == 0:
            first = False
            ct.memmove(key, nxt, self._kfmt.size)
            if self._lib.bpf_lookup_elem(self._fd, key, val) == 0:
                keys.append(key.raw)
                vals.append(val.raw)
        return self._decode(b"".join(keys), b"".join(vals), len(keys))


class PerCpuReader:
    """Reads key 0 of a per-CPU array whose value is `words` u64s, for every CPU."""

    def __init__(self, lib, map_fd: int, words: int, possible_cpus: list[int]) -> None:
        self._lib = lib
        self._fd = map_fd
        self.cpus = possible_cpus
        # The kernel copies one value per possible CPU, in CPU order, with no gaps.
        self._slots = max(1, len(possible_cpus))
        self._buf = (ct.c_uint64 * (words * self._slots))()
        self._key = ct.c_uint32(0)

    def read(self) -> list[int]:
        if self._lib.bpf_lookup_elem(self._fd, ct.byref(self._key), self._buf) != 0:
            return []
        return list(self._buf)
