"""How numbers look on screen: short SI figures, percentages, CPU lists, sparklines.

Pure functions of their arguments, so table cells only change when the shown text
changes and the UI can skip every cell whose text is the same as last tick.
"""

from __future__ import annotations

from typing import Iterable, Sequence

SPARK = "▁▂▃▄▅▆▇█"
DASH = "-"
SESSION_MARK = "◆"  # on the interface that carries this SSH session, and in the header


def si(x: float | None, unit: str = "") -> str:
    """1234567 -> '1.2M'; None (no rate yet) -> '-'."""
    if x is None:
        return DASH
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.1f}{suffix}{unit}"
    return f"{x:.0f}{unit}"


def pct(x: float | None) -> str:
    return DASH if x is None else f"{x:.1f}"


def cpu_list(cpus: Iterable[int] | None) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (the kernel's smp_affinity_list notation)."""
    if cpus is None:
        return DASH
    ids = sorted(set(cpus))
    if not ids:
        return DASH
    parts: list[str] = []
    start = prev = ids[0]
    for c in ids[1:] + [-2]:
        if c == prev + 1:
            prev = c
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = c
    return ",".join(parts)


def mask(text: str | None) -> str:
    """A hex CPU mask as the kernel prints it, with the noise removed: '00000000,000000f0' -> 'f0'."""
    if text is None:
        return DASH
    bare = text.replace(",", "").lstrip("0")
    return bare or "0"


def sparkline(values: Sequence[float | None], width: int = 8) -> str:
    """The last `width` values scaled to their own maximum; unknown values are blank."""
    tail = list(values)[-width:]
    known = [v for v in tail if v is not None]
    top = max(known) if known else 0.0
    out = []
    for v in tail:
        if v is None:
            out.append(" ")
        elif top <= 0:
            out.append(SPARK[0])
        else:
            out.append(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))])
    return "".join(out).rjust(width)


def interval(seconds: float) -> str:
    return f"{seconds:g}s"
