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

Whether an IRQ can be moved at all is not in any file: kernel-managed IRQs (spread by the
kernel over the CPUs, as nvme and virtio-blk do) and per-CPU ones refuse every new mask.
`probe_managed` asks the kernel without changing anything; see there.
"""

from __future__ import annotations

import errno
import os
from functools import lru_cache
from typing import Any, Callable, Collection, Iterable, TypeVar

from nettop.collectors.cpus import parse_cpu_list, parse_cpu_mask
from nettop.collectors.numbers import MAX_NODES, signed_decimal
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import IrqAffinity
from nettop.kernel.sysroot import HeldDir, HoldBudget, SysRoot

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
    node = signed_decimal(text, "node")
    if node >= MAX_NODES:
        raise ValueError(f"node {node} is beyond any NUMA node ({MAX_NODES - 1})")
    return None if node < 0 else node


def probe_managed(root: SysRoot, irq: int) -> bool | None:
    """True when user space may not set this IRQ's affinity (kernel-managed or per-CPU).

    The kernel's write handler for smp_affinity_list checks irq_can_set_affinity_usr()
    before it parses the new mask: a movable IRQ answers an unparsable list ("z") with
    EINVAL and nothing changes, an unmovable one with EPERM (EIO before 6.12). An empty
    mask would not do: the kernel takes it as "pick a default" and moves the IRQ. Only
    the live kernel is asked (a captured tree is never written); without root, or for any
    other answer, the truth is unknown: None.
    """
    if not root.live:
        return None
    try:
        fd = os.open(root.join(f"proc/irq/{irq}/smp_affinity_list"), os.O_WRONLY)
    except OSError:
        return None
    try:
        os.write(fd, b"z\n")
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EIO):
            return True
        return False if exc.errno == errno.EINVAL else None
    finally:
        os.close(fd)
    return None  # accepted an unparsable mask: a kernel that does not say


class ManagedCache:
    """`probe_managed` once per IRQ: an IRQ's managed flag is fixed for its life, so the
    answer is kept until the number is reused by an IRQ of another name."""

    def __init__(self, root: SysRoot) -> None:
        self.root = root
        self._known: dict[int, tuple[str | None, bool | None]] = {}

    def get(self, irq: int, name: str | None) -> bool | None:
        hit = self._known.get(irq)
        if hit is None or hit[0] != name:
            hit = (name, probe_managed(self.root, irq))
            self._known[irq] = hit
        return hit[1]


class IrqFiles:
    """/proc/irq held open (HeldDir), and what each IRQ's four files gave last time: an
    IRQ whose files hold the bytes of its last read is not parsed again, only stamped
    anew (the settings rotation keeps one)."""

    __slots__ = ("dir", "names", "last")

    def __init__(self, root: SysRoot, budget: HoldBudget | None = None) -> None:
        self.dir = HeldDir(root, "proc/irq", budget)
        self.names: dict[int, tuple[str, str, str, str]] = {}
        # irq -> (the four files' bytes, (affinity, effective, hint, node) parsed of them)
        self.last: dict[int, tuple[tuple[bytes | None, ...], tuple]] = {}

    def forget(self, keep: Iterable[int]) -> None:
        """Drop what is kept of the IRQs not in `keep`."""
        wanted = set(keep)
        self.names = {i: n for i, n in self.names.items() if i in wanted}
        self.last = {i: v for i, v in self.last.items() if i in wanted}

    def close(self) -> None:
        self.dir.close()


def read_irq_affinity(
    root: SysRoot, irqs: Iterable[int], managed: Callable[[int], bool | None] | None = None,
    read_at: float | None = None, files: IrqFiles | None = None, hold: Collection[int] = (),
) -> tuple[dict[int, IrqAffinity], list[Problem]]:
    """IrqAffinity of each IRQ in `irqs` that still exists (stamped `read_at`), plus what
    could not be read. `managed(irq)` says whether the IRQ is unmovable (a
    `ManagedCache`), when given; `files`: the held /proc/irq and last values (the
    settings rotation's); `hold`: the IRQs read every tick (on screen), whose files
    `files` keeps open."""
    out: dict[int, IrqAffinity] = {}
    problems: list[Problem] = []
    own = files is None
    irqf = IrqFiles(root) if files is None else files
    held = irqf.dir
    held.begin()
    names, last = irqf.names, irqf.last
    try:
        for irq in irqs:
            n = names.get(irq)
            if n is None:
                n = names[irq] = (f"{irq}/smp_affinity_list", f"{irq}/effective_affinity_list",
                                  f"{irq}/affinity_hint", f"{irq}/node")
            told = len(problems)
            keep = irq in hold
            try:
                first: bytes | None = held.read(n[0], keep)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    continue  # the IRQ vanished since it was mapped
                problems.append(from_oserror(f"/proc/irq/{n[0]}", exc))
                first = _FAILED
            raw = (first, _bytes(held, n[1], problems, keep), _bytes(held, n[2], problems, keep),
                   _bytes(held, n[3], problems, keep))
            prev = last.get(irq)
            if prev is not None and prev[0] == raw:
                parsed = prev[1]  # the same bytes: the same values, read again now
            else:
                parsed = (_parse(n[0], raw[0], parse_affinity_list, problems),
                          _parse(n[1], raw[1], parse_affinity_list, problems),
                          _parse(n[2], raw[2], parse_affinity_hint, problems),
                          _parse(n[3], raw[3], parse_node, problems))
                if len(problems) == told:  # a failure is told again at the next read
                    last[irq] = (raw, parsed)
            out[irq] = IrqAffinity(irq, parsed[0], parsed[1], parsed[2], parsed[3],
                                   managed(irq) if managed is not None else None, read_at)
    finally:
        if own:
            irqf.close()
    return out, problems


class _Failed:
    """A read that failed in a way worth telling: no value (and the IRQ's values are not
    remembered, so the next read tells it again)."""


_FAILED: Any = _Failed()


def _bytes(held: HeldDir, name: str, problems: list[Problem], hold: bool = False) -> bytes | None:
    try:
        return held.read(name, hold)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return None
        problems.append(from_oserror(f"/proc/irq/{name}", exc))
        return _FAILED


def _parse(name: str, raw: bytes | None, parse: Callable[[str], T | None],
           problems: list[Problem]) -> T | None:
    if type(raw) is not bytes:
        return None
    text = raw.decode("latin-1").strip()
    try:
        return parse(text)
    except ValueError as exc:
        problems.append(malformed(f"/proc/irq/{name}", f"{text[:60]!r} ({exc})"))
        return None
