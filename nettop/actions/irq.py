"""IRQ affinity changes: one IRQ to a CPU list, an interface's queue IRQs spread one per CPU,
each IRQ back to its driver's `affinity_hint`, or spread over the NIC's NUMA-local CPUs.

The value is `smp_affinity_list` as the kernel prints it ("0-3"); after the write the
result also shows `effective_affinity_list`, the CPU the interrupt controller really
targets, because x86 delivers to one CPU of the requested set ("requested 0-3,
effective 1"). The kernel's refusals mean different things and each gets its own line:
a managed IRQ (EIO before 6.12, EPERM since) belongs to the driver's queue layout, a
mask with no online CPU is EINVAL, a CPU beyond nr_cpu_ids is EOVERFLOW/ERANGE, and a
full x86 vector space on the target CPUs is ENOSPC.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Iterable

from nettop.actions.base import (ActionError, Change, Setting, Value, need_iface, read_file, register,
                                 write_file)
from nettop.actions.typed import CPU_ID_LIMIT, MAX_TEXT, CpuSetError, clip, format_span, parse_cpu_spec, possible_ncpus
from nettop.collectors.cpus import ONLINE, POSSIBLE, format_cpu_list, parse_cpu_mask, read_online_cpus
from nettop.collectors.irq_affinity import probe_managed
from nettop.kernel.sysroot import LIVE, SysRoot

IRQ_MAX = 2**31 - 1  # IRQ numbers are unsigned ints in the kernel; /proc/irq has far fewer


def parse_cpus(text: str, ncpus: int | None = None) -> tuple[int, ...]:
    """A typed CPU set: a list ("0-3,8", "0-7:2/4") or a hex mask ("f0", "0xf0", "ff,00000000").

    Text with "-" or several comma-separated decimals is a list; a token with hex letters,
    a "0x" prefix, or comma groups of 8 digits after the first is a mask; a bare decimal
    number ("3") is the CPU list "3". Every id is checked against `ncpus` arithmetically,
    before anything is expanded: `check_cpus` passes the host's possible CPUs; without it
    the bound is CPU_ID_LIMIT, above any kernel's. Raises CpuSetError (a ValueError) with
    the reason; an all-zero mask gives ().
    """
    return parse_cpu_spec(text).expand(CPU_ID_LIMIT if ncpus is None else ncpus)


def _read_cpus(root: SysRoot, rel: str) -> str:
    with open(root.join(rel), "rb") as f:
        return f.read(MAX_TEXT).decode("ascii", "replace")


def online_cpus(root: SysRoot = LIVE) -> tuple[int, ...]:
    try:
        return parse_cpus(_read_cpus(root, ONLINE), nr_cpu_ids(root))
    except (OSError, ValueError):
        cpus, _ = read_online_cpus(root)
        return cpus


def nr_cpu_ids(root: SysRoot = LIVE) -> int:
    """The kernel's CPU id space (possible CPUs' highest + 1): what sizes every mask."""
    try:
        return possible_ncpus(_read_cpus(root, POSSIBLE))
    except (OSError, ValueError):
        return os.cpu_count() or 1


def check_cpus(what: str, text: Value, allow_empty: bool = False) -> tuple[int, ...]:
    """CPUs of a request, all online; ActionError naming the offending ones."""
    n = nr_cpu_ids()
    try:
        cpus = parse_cpus(text if isinstance(text, str) else str(text), n)
    except CpuSetError as exc:
        if exc.beyond is not None:
            online = online_cpus()
            raise ActionError(f"{what}: CPU {format_span(*exc.beyond)} does not exist (this kernel has "
                              f"CPUs 0-{n - 1}; online {format_cpu_list(online)})", errno.ERANGE) from None
        raise ActionError(f"{what}: {exc}; give a CPU list like 0-3,8 or a hex mask like f0",
                          errno.EINVAL) from None
    if not cpus and not allow_empty:
        raise ActionError(f"{what}: the CPU set is empty; give at least one online CPU", errno.EINVAL)
    online = online_cpus()
    offline = [c for c in cpus if c not in online]
    if offline:
        raise ActionError(f"{what}: CPU {format_cpu_list(offline)} is offline (online: "
                          f"{format_cpu_list(online)})", errno.EINVAL)
    return cpus


@register
@dataclass(frozen=True, slots=True)
class IrqAffinity(Setting):
    value_types = (str,)
    irq: int
    kind = "irq_affinity"

    @property
    def key(self) -> str:
        return f"irq {self.irq} smp_affinity_list"

    def validate(self) -> None:
        if not (isinstance(self.irq, int) and not isinstance(self.irq, bool) and 0 <= self.irq <= IRQ_MAX):
            raise ActionError(f"{clip(self.irq)} is not an IRQ number (see /proc/interrupts)", errno.EINVAL)

    def _path(self, name: str) -> str:
        return self.root.join(f"proc/irq/{self.irq}/{name}")

    def read(self) -> Value:
        return read_file(self._path("smp_affinity_list"))

    def normalize(self, value: Value) -> Value:
        self.validate()
        if not os.path.isdir(self._path("")):
            raise ActionError(f"IRQ {self.irq} does not exist (see /proc/interrupts)", errno.ENOENT)
        cpus = format_cpu_list(check_cpus(f"IRQ {self.irq} affinity", value))
        if probe_managed(self.root, self.irq):  # refused before anything in its group is written
            raise ActionError(self.explain(OSError(errno.EPERM, "managed")), errno.EPERM)
        return cpus

    def write(self, value: Value) -> None:
        write_file(self._path("smp_affinity_list"), str(value))

    def matches(self, requested: Value, after: Value) -> bool:
        try:
            return parse_cpus(str(requested)) == parse_cpus(str(after))
        except ValueError:
            return False

    def effective(self) -> str | None:
        try:
            return "effective " + read_file(self._path("effective_affinity_list"))
        except OSError:
            return None

    def explain(self, exc: OSError) -> str:
        err = exc.errno
        irq = f"IRQ {self.irq}"
        if err in (errno.EIO, errno.EPERM):
            return (f"{irq} is kernel-managed ({errno.errorcode[err]}): its affinity cannot be changed; "
                    "use `ethtool -L` to change the queue count instead")
        if err == errno.EINVAL:
            return f"{irq}: the kernel refused the CPU set (EINVAL): it holds no online CPU this IRQ can use"
        if err in (errno.EOVERFLOW, errno.ERANGE):
            return f"{irq}: the CPU mask is wider than this kernel's CPUs ({errno.errorcode[err]}); give fewer CPUs"
        if err == errno.ENOSPC:
            return (f"{irq}: no free interrupt vector on those CPUs (ENOSPC): the x86 vector space is full "
                    "there; pick other CPUs or spread fewer IRQs onto them")
        if err == errno.ENOENT:
            return f"{irq} is gone (its device was removed or its driver reloaded)"
        if err == errno.EACCES:
            return f"{irq}: permission denied (EACCES); run nettop as root"
        return super(IrqAffinity, self).explain(exc)


def read_hint(irq: int, root: SysRoot = LIVE) -> tuple[int, ...] | None:
    """The driver's suggested CPUs for an IRQ, None when it gives none (all-zero mask)."""
    try:
        cpus = parse_cpu_mask(read_file(root.join(f"proc/irq/{irq}/affinity_hint")))
    except (OSError, ValueError):
        return None
    return cpus or None


def move_irq(irq: int, cpus: str) -> Change:
    return Change(IrqAffinity(irq), cpus)


def spread(irqs: Iterable[int], cpus: str) -> list[Change]:
    """One CPU per IRQ, round-robin over the CPU list, in the order the IRQs are given."""
    pool = check_cpus("spread", cpus)
    return [Change(IrqAffinity(irq), str(pool[i % len(pool)])) for i, irq in enumerate(irqs)]


def apply_hints(irqs: Iterable[int]) -> list[Change]:
    """Each IRQ to its driver's affinity_hint; IRQs without a hint are left out."""
    out = []
    for irq in irqs:
        hint = read_hint(irq)
        if hint:
            out.append(Change(IrqAffinity(irq), format_cpu_list(hint)))
    if not out:
        raise ActionError("none of these IRQs has an affinity_hint from its driver; spread them instead")
    return out


def queue_irqs(ifname: str) -> list[int]:
    """The queue IRQs of an interface, in queue order (from nettop's queue map)."""
    from nettop.collectors.interrupts import read_interrupts
    from nettop.collectors.queue_irqs import map_queues

    need_iface(ifname)
    table, _ = read_interrupts(LIVE)
    qmap, _ = map_queues(LIVE, ifname, table, None)
    irqs: list[int] = []
    for q in qmap.queues:
        for irq in q.irqs:
            if irq not in irqs:
                irqs.append(irq)
    if not irqs:
        raise ActionError(f"{ifname} has no queue IRQs nettop can find (virtual devices such as "
                          "veth have none); move single IRQs with `nettop set irq`")
    return irqs


def numa_local(ifname: str, irqs: Iterable[int]) -> list[Change]:
    """Spread over the CPUs local to the NIC's NUMA node (its `local_cpulist`)."""
    from nettop.collectors.device_info import local_cpus

    need_iface(ifname)
    local = local_cpus(LIVE, ifname)
    if not local:
        raise ActionError(f"{ifname} reports no NUMA-local CPUs (no device local_cpulist); spread over a CPU list instead")
    online = set(online_cpus())
    usable = [c for c in local if c in online]
    if not usable:
        raise ActionError(f"none of {ifname}'s NUMA-local CPUs ({format_cpu_list(local)}) is online")
    return spread(irqs, format_cpu_list(usable))
