"""Where each NIC queue IRQ may run, where it really runs, and what the driver suggests.

/proc/irq/N holds three CPU sets that often disagree, and the disagreement is the point:
`smp_affinity_list` is what was requested (by irqbalance, a script or nettop),
`effective_affinity_list` is the one CPU the interrupt controller actually targets
(x86 delivers to a single CPU of the requested set), and `affinity_hint` is the driver's
suggestion, usually the queue's local CPU, all zeros when the driver gives none. `node`
is the NUMA node of the device. An operator who wrote "0-3" and sees the IRQ land only on
CPU 0 needs both of the first two.

Only the IRQs asked for are read (the sampler passes the NIC queue IRQs): four small
files each, so a 4096-IRQ host costs no more than its 64 queue IRQs. An IRQ whose
directory has gone (device removed, driver reloaded between the queue map and this read)
is skipped without a problem: the next queue map will not name it. The same few texts
("0-255", the node's mask) repeat across IRQs and ticks, so parsed sets are memoized.
"""

from __future__ import annotations

import errno
from functools import lru_cache
from typing import Callable, Iterable, TypeVar

from nettop.collectors.cpus import parse_cpu_list, parse_cpu_mask
from nettop.problems import Problem, from_oserror, malformed
from nettop.snapshot import IrqAffinity
from nettop.sysroot import SysRoot

# A file that is simply not provided: effective_affinity_list without
# CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK, node without CONFIG_NUMA.
_ABSENT = (errno.ENOENT,)

T = TypeVar("T")


@lru_cache(maxsize=4096)
def parse_affinity_list(text: str) -> tuple[int, ...] | None:
    """smp_affinity_list / effective_affinity_list text -> CPU ids; raises ValueError.

    An empty list (an IRQ that is shut down may print an empty effective list) is None:
    the IRQ targets no CPU, which the UI shows differently from "CPU 0".
    """
    cpus = parse_cpu_list(text)
    return cpus or None


@lru_cache(maxsize=4096)
def parse_affinity_hint(text: str) -> tuple[int, ...] | None:
    """affinity_hint (a hex mask) -> CPU ids, or None when the driver gave no hint."""
    cpus = parse_cpu_mask(text)
    return cpus or None


@lru_cache(maxsize=4096)
def parse_node(text: str) -> int | None:
    """/proc/irq/N/node -> NUMA node; -1 (NUMA_NO_NODE) -> None; raises ValueError."""
    node = int(text)
    return None if node < 0 else node


def read_irq_affinity(
    root: SysRoot, irqs: Iterable[int]
) -> tuple[dict[int, IrqAffinity], list[Problem]]:
    """IrqAffinity of each IRQ in `irqs` that still exists, plus what could not be read."""
    out: dict[int, IrqAffinity] = {}
    problems: list[Problem] = []
    for irq in irqs:
        base = f"proc/irq/{irq}/"
        try:
            text = root.read_line(base + "smp_affinity_list")
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue  # the IRQ vanished since it was mapped
            problems.append(from_oserror("/" + base + "smp_affinity_list", exc))
            affinity = None
        else:
            affinity = _parse(base + "smp_affinity_list", text, parse_affinity_list, problems)
        out[irq] = IrqAffinity(
            irq=irq,
            affinity=affinity,
            effective=_read(root, base + "effective_affinity_list", parse_affinity_list,
                            problems),
            hint=_read(root, base + "affinity_hint", parse_affinity_hint, problems),
            node=_read(root, base + "node", parse_node, problems),
        )
    return out, problems


def _read(root: SysRoot, rel: str, parse: Callable[[str], T | None],
          problems: list[Problem]) -> T | None:
    try:
        text = root.read_line(rel)
    except OSError as exc:
        if exc.errno not in _ABSENT:
            problems.append(from_oserror("/" + rel, exc))
        return None
    return _parse(rel, text, parse, problems)


def _parse(rel: str, text: str, parse: Callable[[str], T | None],
           problems: list[Problem]) -> T | None:
    try:
        return parse(text)
    except ValueError as exc:
        problems.append(malformed("/" + rel, f"{text[:60]!r} ({exc})"))
        return None
