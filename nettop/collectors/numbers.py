"""Strict numbers from kernel text: what `int()` alone would wrongly accept.

Python's `int()` takes "+5", "-5", "1_000", " 7 " and any Unicode decimal digit
("٣" is 3), and `str.isdigit()` is true for "²", which `int()` then refuses. The kernel
prints none of these: its counters are plain ASCII digits (`%u`, `%llu`) or hex (`%x`),
never signed and never wider than their C type. So every number read from /proc and
/sys goes through these helpers, and a field that is wider than its counter (more than
64 bits, or more than 32 where the kernel keeps 32) is corrupt, not a big number.
"""

from __future__ import annotations

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
MAX_NODES = 1 << 10  # CONFIG_NODES_SHIFT is at most 10 on every architecture
_DEC_DIGITS = {32: 10, 64: 20}  # digits of the widest value of each width
_HEX_DIGITS = {32: 8, 64: 16}


def is_decimal(s: str) -> bool:
    """True for a non-empty run of ASCII digits: "12" yes; "²", "+1", "1_0", "" no."""
    return s.isascii() and s.isdigit()


def decimal(s: str, bits: int = 64, what: str = "value") -> int:
    """An unsigned counter printed in decimal, at most `bits` wide; ValueError otherwise."""
    s = s.strip()
    if s.isascii() and s.isdigit() and len(s) <= 19:  # the common case: under 10**19 < 2**64
        n = int(s)
        if not n >> bits:
            return n
    if not is_decimal(s):
        raise ValueError(f"{what} {s[:24]!r} is not an unsigned decimal number")
    if len(s) > _DEC_DIGITS.get(bits, 20) and len(s.lstrip("0")) > _DEC_DIGITS.get(bits, 20):
        raise ValueError(f"{what} {s[:24]}... is wider than {bits} bits (corrupt)")
    n = int(s.lstrip("0") or "0")
    if n >> bits:
        raise ValueError(f"{what} {n} is wider than {bits} bits (corrupt)")
    return n


def signed_decimal(s: str, what: str = "value") -> int:
    """A small signed number such as a NUMA node ("-1" = none); ValueError otherwise."""
    s = s.strip()
    body = s[1:] if s.startswith("-") else s
    if not is_decimal(body) or len(body) > 10:
        raise ValueError(f"{what} {s[:24]!r} is not a decimal number")
    return int(s)


_HEX = frozenset("0123456789abcdefABCDEF")


def hexadecimal(s: str, bits: int = 32, what: str = "value") -> int:
    """An unsigned counter printed as `%x`/`%08x`, at most `bits` wide; ValueError otherwise."""
    if not s or not _HEX.issuperset(s):
        raise ValueError(f"{what} {s[:24]!r} is not hexadecimal")
    if len(s) > _HEX_DIGITS.get(bits, 16) and len(s.lstrip("0")) > _HEX_DIGITS.get(bits, 16):
        raise ValueError(f"{what} {s[:24]}... is wider than {bits} bits (corrupt)")
    return int(s.lstrip("0") or "0", 16)
