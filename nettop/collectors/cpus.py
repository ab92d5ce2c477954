"""CPU sets as the kernel writes them: lists ("0-3,8") and hex masks ("00000000,0000000f").

The same CPU set reaches nettop in two spellings: `smp_affinity_list`, `cpu/online` and
`effective_affinity_list` print lists, while `smp_affinity`, `rps_cpus` and `xps_cpus`
print hex masks split into 32-bit groups. Everything that reads or writes either goes
through these helpers, so a mask written by nettop looks exactly like the one the kernel
prints back and a change can be verified by comparing strings.

Offline CPUs leave gaps, so CPU ids are never assumed to be 0..N-1: the online set comes
from `/sys/devices/system/cpu/online`, or from the `cpuN` lines of /proc/stat, which the
kernel prints for online CPUs only.
"""

from __future__ import annotations

import functools
from typing import Iterable

from nettop.model.problems import Problem, from_oserror
from nettop.kernel.held_files import HeldFiles
from nettop.kernel.sysroot import SysRoot

ONLINE = "sys/devices/system/cpu/online"
OFFLINE = "sys/devices/system/cpu/offline"
POSSIBLE = "sys/devices/system/cpu/possible"
STAT = "proc/stat"


# The largest CONFIG_NR_CPUS any architecture allows (x86 MAXSMP, powerpc): a CPU id at or
# beyond it is not a CPU but a corrupt file or a typo, and is refused before any set of
# CPUs is built, so "0-4294967295" costs nothing.
MAX_CPUS = 8192


def parse_cpu_list(text: str, limit: int = MAX_CPUS) -> tuple[int, ...]:
    """CPU ids of a kernel CPU list: "0-3,8,10-11" -> (0, 1, 2, 3, 8, 10, 11); "" -> ().

    Also accepts the kernel's strided ranges ("0-7:2/4" = first 2 of every 4), which
    users may type. Every id must be below `limit` (the host's possible CPUs when the
    caller knows them, else MAX_CPUS); bounds are checked arithmetically before a range
    is expanded. Raises ValueError for anything else.
    """
    text = text.strip()
    if not text:
        return ()
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty item in CPU list {_short(text)!r}")
        span, _, stride = part.partition(":")
        lo_s, dash, hi_s = span.partition("-")
        lo = _cpu_id(lo_s, text, limit)
        hi = _cpu_id(hi_s, text, limit) if dash else lo
        if hi < lo:
            raise ValueError(f"descending range {_short(part)!r} in CPU list {_short(text)!r}")
        if stride:
            used_s, slash, group_s = stride.partition("/")
            if not slash:
                raise ValueError(f"stride {_short(stride)!r} in CPU list {_short(text)!r} needs used/group")
            used, group = _cpu_id(used_s, text, limit), _cpu_id(group_s, text, limit)
            if used == 0 or group == 0 or used > group:
                raise ValueError(f"bad stride {_short(stride)!r} in CPU list {_short(text)!r}")
            cpus.update(c for c in range(lo, hi + 1) if (c - lo) % group < used)
        else:
            cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def _short(s: str) -> str:
    return s if len(s) <= 40 else s[:37] + "..."


def _cpu_id(s: str, whole: str, limit: int = MAX_CPUS) -> int:
    s = s.strip()
    if not (s.isascii() and s.isdigit()):  # rejects "", "-1", "+3", "0x1", "²", "1_0"
        raise ValueError(f"{_short(s)!r} is not a CPU number in {_short(whole)!r}")
    if len(s.lstrip("0")) > len(str(limit)) or int(s) >= limit:
        raise ValueError(f"CPU {_short(s)} in {_short(whole)!r} is beyond the highest possible "
                         f"CPU id ({limit - 1})")
    return int(s)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's compact list form: (0, 1, 2, 3, 8, 10, 11) -> "0-3,8,10-11"; () -> ""."""
    ids = sorted(set(cpus))
    out: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpu_mask(text: str, limit: int = MAX_CPUS) -> tuple[int, ...]:
    """CPU ids set in a kernel hex mask: "00000000,0000000f" -> (0, 1, 2, 3); "0" -> ().

    Each comma-separated group is one 32-bit word, most significant first, as the kernel
    prints and parses them; a mask without commas is one number. A set bit at or beyond
    `limit` is refused (checked on the digits, before the number is built). Raises
    ValueError.
    """
    text = text.strip()
    if not text:
        raise ValueError("empty CPU mask")
    if "," in text:
        groups = text.split(",")
        for group in groups:
            if not group or len(group) > 8:
                raise ValueError(f"CPU mask {_short(text)!r}: each group between commas is 1-8 hex digits")
            _check_hex(group, text)
        digits = "".join(g.rjust(8, "0") for g in groups)
    else:
        _check_hex(text, text)
        digits = text
    digits = digits.lstrip("0")
    if 4 * len(digits) > limit + 3:
        raise ValueError(f"CPU mask {_short(text)!r} sets a CPU beyond the highest possible "
                         f"CPU id ({limit - 1})")
    value = int(digits or "0", 16)
    if value >> limit:
        raise ValueError(f"CPU mask {_short(text)!r} sets a CPU beyond the highest possible "
                         f"CPU id ({limit - 1})")
    bits = bin(value)[:1:-1]  # least significant bit first
    return tuple(i for i, b in enumerate(bits) if b == "1")


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _check_hex(s: str, whole: str) -> None:
    if s.startswith(("0x", "0X", "+", "-")):
        raise ValueError(f"CPU mask {_short(whole)!r} is plain hex digits, without 0x or sign")
    if not _HEX_DIGITS.issuperset(s):
        raise ValueError(f"CPU mask {_short(whole)!r} is not hexadecimal")


def format_cpu_mask(cpus: Iterable[int], ncpus: int) -> str:
    """A mask exactly as sysfs prints it for a kernel with `ncpus` CPU ids (nr_cpu_ids).

    32-bit groups of 8 hex digits, most significant first; the leading group has only
    as many digits as its bits need: 2 CPUs -> "3", 8 -> "ff", 36 -> "f,ffffffff".
    Raises ValueError for a CPU id outside 0..ncpus-1.
    """
    if ncpus <= 0:
        raise ValueError(f"ncpus must be positive, got {ncpus}")
    value = 0
    for cpu in cpus:
        if not 0 <= cpu < ncpus:
            raise ValueError(f"CPU {cpu} does not exist on a kernel with {ncpus} CPU ids")
        value |= 1 << cpu
    groups = []
    lead_bits = ncpus % 32 or 32
    nwords = (ncpus + 31) // 32
    for w in range(nwords - 1, -1, -1):
        word = (value >> (32 * w)) & 0xFFFFFFFF
        width = (lead_bits + 3) // 4 if w == nwords - 1 else 8
        groups.append(f"{word:0{width}x}")
    return ",".join(groups)


@functools.lru_cache(maxsize=16)
def _tick_cpu_list(text: str) -> tuple[tuple[int, ...], frozenset[int]]:
    """`parse_cpu_list` (ids and their set) of a text that is read every tick and nearly
    never changes (cpu/online, cpu/offline): a 1024-CPU host's list is 1024 ints to
    build again each time. A ValueError is raised again on every call (not cached)."""
    cpus = parse_cpu_list(text)
    return cpus, frozenset(cpus)


def read_online_cpus(root: SysRoot, files: HeldFiles | None = None) -> tuple[tuple[int, ...], list[Problem]]:
    """Online CPU ids from sysfs; from /proc/stat's cpuN lines when sysfs has no answer.

    `cpu/offline` (when present) is the kernel's word too: a CPU it names is never
    taken as online from /proc/stat, and one both files name is a Problem (a captured
    tree whose files were copied at different times). `files`: the sampler's held
    descriptors (nettop/kernel/held_files.py), read through when given."""
    problems: list[Problem] = []
    src = files if files is not None else root
    offline = _read_offline(src, problems)
    try:
        cpus, cpu_set = _tick_cpu_list(src.read_line(ONLINE))
        if cpus:
            both = cpu_set & offline if offline else None
            if both:
                problems.append(Problem(OFFLINE, (
                    f"{ONLINE} and {OFFLINE} both list CPU {format_cpu_list(both)} (files "
                    "captured at different times?); taken as offline")))
                cpus = tuple(c for c in cpus if c not in offline)
            return cpus, problems
        problems.append(Problem(ONLINE, f"{ONLINE} is empty; taking online CPUs from /proc/stat"))
    except OSError as exc:
        problems.append(from_oserror(ONLINE, exc))
    except ValueError as exc:
        problems.append(Problem(ONLINE, f"cannot parse {ONLINE} ({exc}); taking online CPUs "
                                        "from /proc/stat"))
    # imported here, not at the top: cpustat imports MAX_CPUS from this module
    from nettop.collectors.cpustat import parse_stat

    try:
        text = root.read_text(STAT)
    except OSError as exc:
        problems.append(from_oserror(STAT, exc))
        return (), problems
    times, stat_problems = parse_stat(text)
    problems.extend(stat_problems)
    return tuple(sorted(c for c in times if c not in offline)), problems


def _read_offline(root: SysRoot | HeldFiles, problems: list[Problem]) -> frozenset[int]:
    """CPU ids `cpu/offline` names; empty when the file is absent (older captures)."""
    try:
        return _tick_cpu_list(root.read_line(OFFLINE))[1]
    except OSError:
        return frozenset()
    except ValueError as exc:
        problems.append(Problem(OFFLINE, f"cannot parse {OFFLINE} ({exc}); ignored"))
        return frozenset()


def read_possible_cpus(root: SysRoot) -> tuple[tuple[int, ...], list[Problem]]:
    """Possible CPU ids; `max + 1` is the nr_cpu_ids that sizes every printed CPU mask."""
    try:
        return parse_cpu_list(root.read_line(POSSIBLE)), []
    except OSError as exc:
        return (), [from_oserror(POSSIBLE, exc)]
    except ValueError as exc:
        return (), [Problem(POSSIBLE, f"cannot parse {POSSIBLE}: {exc}")]


def read_cpu_nodes(root: SysRoot) -> dict[int, int]:
    """CPU id -> NUMA node from sys/devices/system/node/node*/cpulist; empty on a kernel
    without NUMA. A node whose list cannot be read or parsed is left out (the CPU panel's
    node filter then says the node is unknown)."""
    out: dict[int, int] = {}
    try:
        names = root.listdir("sys/devices/system/node")
    except OSError:
        return out
    for name in names:
        if not (name.startswith("node") and name[4:].isascii() and name[4:].isdigit()
                and len(name) <= 10):
            continue
        try:
            cpus = parse_cpu_list(root.read_line(f"sys/devices/system/node/{name}/cpulist"))
        except (OSError, ValueError):
            continue
        for cpu in cpus:
            out[cpu] = int(name[4:])
    return out
