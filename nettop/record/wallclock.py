"""Two clocks and what to do when the wall clock is stepped (NTP, `date -s`).

Every sample stores both `t_mono` (CLOCK_MONOTONIC: never steps, orders samples and
gives the rates) and `t_wall` (what a person asks for: "03:12"). Samples are kept and
replayed in the order they were taken (seq within a file, file sequence across
files), never sorted by wall time, so a step of the wall clock cannot reorder or drop
them. A step shows as the wall time advancing by more or less than the monotonic
time between two samples; `steps` finds those, and `position` finds a wall time in an
index whose wall times go back somewhere.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

# NTP slews offsets below 128 ms and steps larger ones; a sample's own jitter is far below
# a second, so a disagreement of a second between the clocks is a step, not noise.
STEP_S = 1.0


class Timed(Protocol):
    """An index entry: a sample's two timestamps."""

    @property
    def t_wall(self) -> float: ...

    @property
    def t_mono(self) -> float: ...


class Clock(Protocol):
    """The recorder's clocks, injectable so that a test can step the wall clock."""

    def wall(self) -> float: ...

    def mono(self) -> float: ...


class SystemClock:
    """CLOCK_REALTIME and CLOCK_MONOTONIC of this host."""

    def wall(self) -> float:
        return time.time()

    def mono(self) -> float:
        return time.monotonic()


@dataclass(frozen=True, slots=True)
class Step:
    """The wall clock moved by `seconds` (negative: back) just before index position `pos`."""

    pos: int
    seconds: float

    def text(self) -> str:
        way = "forward" if self.seconds > 0 else "back"
        return (f"wall clock stepped {way} {_span(abs(self.seconds))} (NTP or date -s); "
                "samples stay in the order they were taken")


def _span(s: float) -> str:
    s = round(s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}" if m else f"{sec} s"


def steps(index: Sequence[Timed], threshold: float = STEP_S, reboots: frozenset[int] = frozenset()) -> list[Step]:
    """Where the wall clock moved by more than `threshold` s unlike the monotonic clock.

    Across a reboot (positions in `reboots`, or a monotonic time that goes back) the
    clocks are not comparable, so that is no step."""
    out = []
    for i in range(1, len(index)):
        a, b = index[i - 1], index[i]
        d_mono = b.t_mono - a.t_mono
        if d_mono < 0 or i in reboots:
            continue
        skew = (b.t_wall - a.t_wall) - d_mono
        if abs(skew) >= threshold:
            out.append(Step(i, skew))
    return out


def runs(index: Sequence[Timed]) -> list[tuple[int, int]]:
    """[start, stop) ranges of positions whose wall times never go back."""
    out, start = [], 0
    for i in range(1, len(index)):
        if index[i].t_wall < index[i - 1].t_wall:
            out.append((start, i))
            start = i
    if index:
        out.append((start, len(index)))
    return out


def position(index: Sequence[Timed], t_wall: float, spans: list[tuple[int, int]] | None = None) -> int:
    """Position of the last sample at or before wall time `t_wall` (0 if none).

    Where the wall clock went back, a wall time can have happened twice: the first
    time, in recorded order, is the one found. A time the clock stepped forward over
    was not read there, so a later stretch that did read it (after a step back: `date
    -s` +1 h, then back) is the one found; if none did, the sample before the step. A
    time nothing covers (the recorder was not running) finds the last sample before it."""
    spans = runs(index) if spans is None else spans
    best, best_t = 0, float("-inf")
    skipped: int | None = None
    for start, stop in spans:
        first, last = index[start].t_wall, index[stop - 1].t_wall
        if first <= t_wall <= last:
            p = bisect.bisect_right(index, t_wall, start, stop, key=lambda s: s.t_wall) - 1
            if p + 1 < stop and _stepped_over(index[p], index[p + 1], t_wall):
                skipped = p if skipped is None else skipped
                continue
            return p
        if best_t < last <= t_wall:
            best, best_t = stop - 1, last
    return best if skipped is None else skipped


def _stepped_over(a: Timed, b: Timed, t_wall: float) -> bool:
    """The wall clock stepped forward between samples a and b, past t_wall unread."""
    d_mono = b.t_mono - a.t_mono
    return d_mono >= 0 and (b.t_wall - a.t_wall) - d_mono >= STEP_S and t_wall > a.t_wall + d_mono


def parse_when(text: str, now: float | None = None) -> float:
    """A wall time a person types, as Unix time; ValueError with one line.

    "2026-11-25 03:12", "2026-11-25T03:12:30" (UTC, as nettop shows every time: the
    report, the replay header and its `g` prompt), the same ending in "Z", "UTC" or an
    offset such as "+01:00", "@1795000000" (Unix time), or "-90m" / "-2h" (that long ago)."""
    import datetime as dt

    t = text.strip()
    now = time.time() if now is None else now
    if t.startswith("@"):
        try:
            return float(t[1:])
        except ValueError:
            pass
    elif t.startswith("-") and len(t) > 1:
        from nettop.record.recorder import parse_duration
        try:
            return now - parse_duration(t[1:])
        except ValueError:
            pass
    else:
        iso = t[:-3].strip() + "+00:00" if t.upper().endswith("UTC") else t
        iso = iso[:-1] + "+00:00" if iso.upper().endswith("Z") else iso
        try:
            when = dt.datetime.fromisoformat(iso)
        except ValueError:
            pass
        else:
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.timezone.utc)
            return when.timestamp()
    raise ValueError(f"time {text!r} is not a time (e.g. \"2026-11-25 03:12\", \"2026-11-25 03:12 UTC\", -2h, @1795000000)")
