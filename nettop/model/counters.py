"""Counter arithmetic: deltas across wrap and reset, done once for every source.

Kernel counters come in two widths. /proc/interrupts per-CPU counts, /proc/softirqs and
softnet_stat fields are 32-bit and wrap within hours on a busy 100G host; netlink
stats64, sysfs statistics on 64-bit hosts, /proc/stat and qstats are 64-bit. A counter
that goes backwards without being near its width's end was reset (driver reload, CPU
offlined and back, interface re-created): the traffic since the reset is at least the
new value, so that is the delta, and the caller is told so it can mark the sample.
"""

from __future__ import annotations

from enum import Enum

U32 = 1 << 32
U64 = 1 << 64


class Step(Enum):
    """How a counter moved between two samples."""

    OK = "ok"
    WRAPPED = "wrapped"
    RESET = "reset"


def delta(prev: int, cur: int, modulus: int = U64) -> tuple[int, Step]:
    """Increase of a monotonically counting kernel counter from `prev` to `cur`.

    A backwards step is a wrap when `prev` was in the top quarter of the counter's
    range and `cur` in the bottom quarter (a wrap can only look like that for any
    plausible rate); anything else backwards is a reset.
    """
    if cur >= prev:
        return cur - prev, Step.OK
    if prev >= modulus - (modulus >> 2) and cur < (modulus >> 2):
        return cur + modulus - prev, Step.WRAPPED
    return cur, Step.RESET


def rate(prev: int | None, cur: int | None, elapsed_s: float, modulus: int = U64) -> float | None:
    """Per-second rate of a counter, or None when either side is unknown."""
    if prev is None or cur is None or elapsed_s <= 0:
        return None
    d, _ = delta(prev, cur, modulus)
    return d / elapsed_s
