"""Typed input checked the way the kernel reads it: ASCII numbers, interface names, CPU sets.

Everything an operator types (`nettop set ...`, the TUI's set line) and everything the
journal hands back to a Setting passes through here before it becomes a path or a
number. The rules are deliberately narrower than Python's: `int()` and `str.isdigit()`
accept "²", "１２", "1_000" and " +1", none of which the kernel's `kstrtoint` or
`bitmap_parselist` takes, so only ASCII digits count. A CPU set is validated as text and
arithmetic first (every id below the host's possible CPUs) and expanded only afterwards,
so `0-4294967295` costs the same as `0-3`; the work and memory of every function here are
bounded by the length of its input, never by the numbers inside it.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass

MAX_TEXT = 65536  # characters of one typed value: a list of every CPU of an 8192-CPU host fits
MAX_DIGITS = 20  # a u64 has 20 decimal digits; anything longer is out of every range here
CPU_ID_LIMIT = 65536  # above any kernel's NR_CPUS (8192): a possible-CPU file beyond it is refused
U32_MAX = 2**32 - 1
IFNAMSIZ = 16  # include/uapi/linux/if.h, with its terminating NUL

_DEC = re.compile(r"-?[0-9]+", re.ASCII)
_HEX = re.compile(r"0[xX][0-9a-fA-F]+", re.ASCII)
_LIST_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+)/([0-9]+))?)?", re.ASCII)
_MASK = re.compile(r"[0-9a-f]{1,8}(?:,[0-9a-f]{1,8})*", re.ASCII)
_BLANKS = " \t\n"


def clip(value: object, limit: int = 40) -> str:
    """`repr` of a typed value, cut so that an error line stays one short line."""
    r = repr(value) if not isinstance(value, str) or len(value) <= limit else repr(value[:limit])
    return r if len(r) <= limit else r[: limit - 1] + "…"


def bare(value: object, limit: int = 40) -> str:
    """A short printable name as it is ("target"), anything else as `clip` shows it."""
    if isinstance(value, str) and 0 < len(value) <= limit and value.isprintable() and value.strip() == value:
        return value
    return clip(value, limit)


def whole(text: str) -> int | None:
    """An ASCII whole number ("42", "-5", "0x1f"), or None for anything else.

    Numbers longer than MAX_DIGITS come back as a value just beyond 2**64 (with the sign),
    so range checks refuse them without Python converting a 400-digit string.
    """
    t = text.strip(_BLANKS)
    if _DEC.fullmatch(t):
        digits = t.lstrip("-").lstrip("0") or "0"
        n = int(digits) if len(digits) <= MAX_DIGITS else 2**64 + 1
        return -n if t.startswith("-") else n
    if _HEX.fullmatch(t):
        h = t[2:].lstrip("0") or "0"
        return int(h, 16) if len(h) <= 16 else 2**64 + 1
    return None


def looks_numeric(text: str) -> bool:
    """Whether a person meant a number: a sign and digits of any script ("-5", "²⁹", "١٢")."""
    t = text.strip().lstrip("+-")
    return bool(t) and all(c.isdigit() or c.isnumeric() for c in t)


def ifname_problem(name: object) -> str | None:
    """Why `name` cannot be a Linux interface name (the kernel's dev_valid_name), or None."""
    if not isinstance(name, str) or not name:
        return "an interface name is 1 to 15 characters"
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not valid text"
    if len(raw) >= IFNAMSIZ:
        return f"interface names are at most {IFNAMSIZ - 1} bytes"
    if name in (".", ".."):
        return "'.' and '..' are not interface names"
    if any(c in "/:" or c.isspace() or not c.isprintable() for c in name):
        return "interface names hold no '/', ':', blanks or control characters"
    return None


class CpuSetError(ValueError):
    """A typed CPU set that is not a CPU list or mask, or names CPUs the host lacks."""

    def __init__(self, message: str, err: int = errno.EINVAL, beyond: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.errno = err
        self.beyond = beyond  # (first, last) CPU id past the host's, for the caller's line


@dataclass(frozen=True, slots=True)
class CpuSpec:
    """A parsed CPU set before expansion: strided spans (lo, hi, used, group) or one mask."""

    spans: tuple[tuple[int, int, int, int], ...] = ()
    mask: int | None = None

    @property
    def highest(self) -> int:
        """The highest CPU id the text reaches, -1 for none (the kernel checks range ends)."""
        if self.mask is not None:
            return self.mask.bit_length() - 1
        return max((hi for _, hi, _, _ in self.spans), default=-1)

    def lowest_beyond(self, ncpus: int) -> int:
        """The first CPU id at or past `ncpus` the text names (for "CPU 2-9 does not exist")."""
        if self.mask is not None:
            rest = self.mask >> ncpus
            return ncpus + (rest & -rest).bit_length() - 1
        return min(max(lo, ncpus) for lo, hi, _, _ in self.spans if hi >= ncpus)

    def expand(self, ncpus: int) -> tuple[int, ...]:
        """The CPU ids, sorted; CpuSetError (ERANGE) for an id at or past `ncpus`, before any
        list is built, so the cost is bounded by `ncpus`."""
        if self.highest >= ncpus:
            raise CpuSetError(f"CPU ids reach {self.highest}", errno.ERANGE,
                              (self.lowest_beyond(ncpus), self.highest))
        if self.mask is not None:
            bits = bin(self.mask)[:1:-1]  # least significant bit first
            return tuple(i for i, b in enumerate(bits) if b == "1")
        cpus: set[int] = set()
        for lo, hi, used, group in self.spans:
            cpus.update(c for c in range(lo, hi + 1) if (c - lo) % group < used)
        return tuple(sorted(cpus))


def _num(s: str) -> int:
    s = s.lstrip("0") or "0"
    return int(s) if len(s) <= MAX_DIGITS else 2**64 + 1


def parse_cpu_spec(text: str) -> CpuSpec:
    """A typed CPU set: a CPU list ("0-3,8", "0-7:2/4") or a hex mask ("f0", "0xf0",
    "ff,00000000"), by the same rules as `nettop.actions.irq.parse_cpus`. CpuSetError for
    anything else, including an empty text; an all-zero mask is an empty, valid spec."""
    if not isinstance(text, str):
        raise CpuSetError(f"{clip(text)} is not text")
    if len(text) > MAX_TEXT:
        raise CpuSetError(f"a CPU set of {len(text)} characters is too long (at most {MAX_TEXT})")
    t = text.strip(_BLANKS)
    if not t:
        raise CpuSetError("the CPU set is empty")
    if not t.isascii():
        raise CpuSetError(f"{clip(text)} holds characters other than ASCII digits, hex letters, '-', ',' and ':'")
    low = t.lower()
    if low.startswith("0x"):
        return _mask(low[2:], text)
    is_mask = any(c in low for c in "abcdef") or (
        "," in low and not any(c in low for c in "-:") and all(len(p) == 8 for p in low.split(",")[1:]))
    if is_mask:
        return _mask(low, text)
    spans = []
    for item in t.split(","):
        m = _LIST_ITEM.fullmatch(item)
        if m is None:
            raise CpuSetError(f"{clip(item)} is not a CPU number or range in {clip(text)}")
        lo = _num(m.group(1))
        hi = _num(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise CpuSetError(f"descending range {clip(item)} in {clip(text)}")
        used, group = (_num(m.group(3)), _num(m.group(4))) if m.group(3) is not None else (1, 1)
        if group > U32_MAX:  # the kernel's bitmap_parselist refuses it too (EOVERFLOW)
            raise CpuSetError(f"stride {clip(item)} in {clip(text)}: the group is at most {U32_MAX}", errno.ERANGE)
        if used == 0 or group == 0 or used > group:
            raise CpuSetError(f"bad stride {clip(item)} in {clip(text)}: use USED/GROUP with 1 <= USED <= GROUP")
        spans.append((lo, hi, used, group))
    return CpuSpec(spans=tuple(spans))


def _mask(hexes: str, whole_text: str) -> CpuSpec:
    if not _MASK.fullmatch(hexes):
        raise CpuSetError(f"CPU mask {clip(whole_text)} is not hexadecimal (groups of 1-8 hex "
                          "digits between commas, no sign)")
    value = 0
    for group in hexes.split(","):
        value = (value << 32) | int(group, 16)
    return CpuSpec(mask=value)


def possible_ncpus(text: str) -> int:
    """nr_cpu_ids from /sys/devices/system/cpu/possible ("0-3" -> 4), without expanding it."""
    spec = parse_cpu_spec(text)
    if spec.mask is not None or spec.highest < 0:
        raise CpuSetError(f"{clip(text)} is not a CPU list")
    if spec.highest >= CPU_ID_LIMIT:
        raise CpuSetError(f"the kernel reports CPU {spec.highest}, beyond any NR_CPUS", errno.ERANGE)
    return spec.highest + 1


def format_span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"
