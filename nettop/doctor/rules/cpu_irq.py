"""Where the NIC's interrupts land: concentration, NUMA locality, irqbalance, coalescing."""

from __future__ import annotations

import functools
import operator
from typing import Any, Iterator

from nettop.doctor import thresholds as T
from nettop.doctor.finding import Finding, Severity
from nettop.doctor.rules.common import (
    INTEL, MLX, RH, SCALING, Context, cpus_text, keep, local_cpus, mask_cpus, nics, node_of_cpus, pct,
    queue_irqs, rate,
)
from nettop.model.snapshot import Snapshot


def irq_concentration(ctx: Context) -> Iterator[Finding]:
    """1. A NIC's queue IRQs sit mostly on one loaded CPU while others on the node idle."""
    w, snap = ctx.window, ctx.snap
    loads = w.cpu_loads()
    idling: dict[int, tuple[float, float, float]] | None = None  # the CPUs idle enough, once asked
    for name in nics(snap):
        summed = w.irq_sum_top(queue_irqs(snap, name))
        if summed is None or w.elapsed <= 0:
            continue
        count, i, most = summed
        total = count / w.elapsed
        if total < T.IRQ_BUSY_PER_S:
            continue
        top = w.cpus[i]
        share = most / count
        soft, hard, _ = loads.get(top) or (0.0, 0.0, 100.0)
        if share < T.IRQ_SHARE or soft + hard < T.CPU_LOADED_PCT:
            continue
        node = node_of_cpus(snap, [top])
        if idling is None:  # (a CPU without figures is not in it: the floor is above 0)
            idling = loads.at_least(2, T.CPU_IDLE_PCT)
        idle = [c for c in node if c != top and c in idling]
        if not idle:
            continue
        pool = sorted({top, *idle})
        yield Finding(
            "irq-concentration", name, Severity.WARN,
            f"{pct(share)} of {name}'s queue interrupts land on CPU {top} ({soft + hard:.0f} % softirq+hardirq) "
            f"while {len(idle)} CPU(s) of its node idle",
            "one CPU does the whole NIC's softirq work and becomes the bottleneck; the idle CPUs could share it",
            (f"CPU {top}: {rate(most / w.elapsed)} of {rate(total)} interrupts ({pct(share)})",
             f"CPU {top}: softirq {soft:.0f} %, hardirq {hard:.0f} %",
             f"idle (>= {T.CPU_IDLE_PCT:.0f} %) on the node: CPUs {cpus_text(idle)}"),
            {"share": share, "cpu": float(top), "cpu_load_pct": soft + hard, "irq_per_s": total},
            w.span, (f"nettop set irq {name} spread {cpus_text(pool)}",), None, f"{RH}; {MLX}")


def numa_locality(ctx: Context) -> Iterator[Finding]:
    """2. Queue IRQs, RPS or XPS CPUs on a NUMA node other than the NIC's."""
    snap = ctx.snap
    for name in nics(snap):
        local, ordered, everywhere = _local_set(snap.online_cpus, local_cpus(snap, name))
        if not local or everywhere:
            continue  # one node, or locality unknown
        dev = snap.devices.get(name)
        far_irqs = _far_irqs(snap, name, local)
        far_rps, far_xps, xps_fix = _far_queues(name, dev.queues if dev else (), local, ordered)
        if not (far_irqs or far_rps or far_xps):
            continue
        fix = []
        if far_irqs:
            fix.append(f"nettop set irq {name} numa")
        local_text = _cpus_text(tuple(ordered))
        if far_rps:
            fix.append(f"nettop set rps {name} all {local_text}")
        fix += xps_fix
        node = dev.numa_node if dev else None
        yield Finding(
            "numa-locality", name, Severity.WARN,
            f"{name} is on NUMA node {node if node is not None else '?'} but "
            + ", ".join(x for x in (f"{len(far_irqs)} queue IRQ(s)" if far_irqs else "",
                                    f"RPS of {far_rps} rx queue(s)" if far_rps else "",
                                    f"XPS of {far_xps} tx queue(s)" if far_xps else "") if x)
            + " use CPUs of another node",
            "every packet then crosses the interconnect: remote memory, slower and with more jitter",
            (f"NIC-local CPUs: {local_text}",
             f"remote IRQs: {', '.join(map(str, far_irqs[:8]))}{' ...' if len(far_irqs) > 8 else ''}" if far_irqs
             else "remote IRQs: none"),
            {"far_irqs": float(len(far_irqs)), "far_rps": float(far_rps), "far_xps": float(far_xps)},
            ctx.window.span, tuple(fix), None, f"{MLX}; {SCALING} (RPS/XPS: use CPUs of the NIC's node)")


def _local_set(online: tuple[int, ...], local: tuple[int, ...]) -> tuple[frozenset[int], list[int], bool]:
    """(a NIC's local CPUs as a set, sorted, whether they hold every online CPU). Kept for
    the last few (online, local) tuples by identity (local_cpus hands the same tuple while
    its answer is kept): a set of the 1,024 online CPUs, and per NIC a set and a sort of
    its 256, were ~0.07 ms a tick. Both tuples are held, so their ids cannot be reused."""
    got = _LOCAL_SETS.get(id(local))
    if got is not None and got[0] is local and got[1] is online:
        return got[2], list(got[3]), got[4]
    as_set = frozenset(local)
    found = (local, online, as_set, tuple(sorted(as_set)), as_set >= set(online))
    keep(_LOCAL_SETS, id(local), found, _FAR_KEEP)
    return as_set, list(found[3]), found[4]


# id(a NIC's local CPUs tuple) -> (that tuple, the online tuple, what `_local_set` found)
_LOCAL_SETS: dict[int, tuple[tuple[int, ...], tuple[int, ...], frozenset[int], tuple[int, ...], bool]] = {}


def _far_irqs(snap: Snapshot, name: str, local: frozenset[int]) -> list[int]:
    """The NIC's queue IRQs whose CPUs (effective, else set affinity) are all off `local`.
    Kept per NIC while its queue IRQs, their IrqAffinity objects and `local` stay the
    same: the reader hands the same IrqAffinity object while an IRQ's affinity is
    unchanged, and comparing 128 of them by identity in C costs a fraction of the walk
    (~0.1 ms a tick at 4 x 128 queues)."""
    irqs = queue_irqs(snap, name)
    affs = list(map(snap.irq_affinity.get, irqs))
    got = _FAR_IRQS.get(name)
    if (got is not None and got[0] == irqs and (got[1] is local or got[1] == local)
            and all(map(operator.is_, got[2], affs))):
        return list(got[3])
    far = []
    for irq, aff in zip(irqs, affs):
        cpus = (aff.effective or aff.affinity) if aff else None
        if cpus and local.isdisjoint(cpus):
            far.append(irq)
    keep(_FAR_IRQS, name, (irqs, local, affs, tuple(far)), _FAR_KEEP)
    return far


# NIC name -> (its queue IRQs, its local CPUs, their IrqAffinity objects, the far ones);
# the affinities are held, so their ids cannot be reused while they are kept
_FAR_IRQS: dict[str, tuple[list[int], frozenset[int], list[Any], tuple[int, ...]]] = {}


# NIC name -> (its queues, its local CPUs, what `_far_queues` found): a NIC's queue
# settings are read in rotation and its QueueConfig tuple is the same object until one
# of them changes, so at 4 x 128 queues the walk and ~500 XPS fix lines are done once,
# not every tick. The tuple is held, so its id cannot be reused while it is kept.
_FAR: dict[str, tuple[tuple[Any, ...], frozenset[int], tuple[int, int, tuple[str, ...]]]] = {}
_FAR_KEEP = 64


def _far_queues(name: str, queues: tuple[Any, ...], local: frozenset[int],
                ordered: list[int]) -> tuple[int, int, tuple[str, ...]]:
    """(rx queues whose RPS CPUs leave the node, tx queues whose XPS CPUs do, the XPS
    fixes) of one NIC; kept while its queue settings and local CPUs stay the same."""
    got = _FAR.get(name)
    if got is not None and got[0] is queues and got[1] == local:
        return got[2]
    far_rps = far_xps = 0
    xps_fix = []
    beyond: dict[str | None, bool] = {}  # mask -> names a CPU off the node (a NIC repeats a few)
    for q in queues:
        if q.kind not in ("rx", "tx"):
            continue
        mask = q.rps_cpus if q.kind == "rx" else q.xps_cpus
        far = beyond.get(mask)
        if far is None:
            far = beyond[mask] = bool(set(mask_cpus(mask)) - local)
        if not far:
            continue
        if q.kind == "rx":
            far_rps += 1
        else:
            far_xps += 1
            xps_fix.append(f"nettop set xps {name} {q.index} {_cpu_text(ordered[q.index % len(ordered)])}")
    found = (far_rps, far_xps, tuple(xps_fix))
    keep(_FAR, name, (queues, local, found), _FAR_KEEP)
    return found


@functools.lru_cache(maxsize=64)
def _cpus_text(cpus: tuple[int, ...]) -> str:
    """`cpus_text` of a NIC's local CPUs, cached: the same few lists every tick."""
    return cpus_text(cpus)


@functools.lru_cache(maxsize=1024)
def _cpu_text(cpu: int) -> str:
    """`cpus_text` of one CPU, cached: the XPS fixes of 4 NICs x 128 queues name the same
    few hundred CPUs every tick."""
    return cpus_text([cpu])


def _manual_spread(ctx: Context, name: str) -> bool:
    """Each queue IRQ pinned to its own single CPU: the mark of a hand-made (or nettop) spread."""
    snap = ctx.snap
    irqs = queue_irqs(snap, name)
    if len(irqs) < 2:
        return False
    cpus = []
    for irq in irqs:
        aff = snap.irq_affinity.get(irq)
        if aff is None or aff.affinity is None or len(aff.affinity) != 1:
            return False
        cpus.append(aff.affinity[0])
    return len(set(cpus)) == len(cpus)


def irqbalance(ctx: Context) -> Iterator[Finding]:
    """3. irqbalance running over manual IRQ affinity; or no irqbalance and every NIC IRQ on CPU 0."""
    snap = ctx.snap
    moved = [e for e in ctx.window.events if e.kind == "tuning" and " irq" in f" {e.text.lower()}"]
    for name in nics(snap):
        irqs = queue_irqs(snap, name)
        if snap.host_config.irqbalance_running:
            if moved or _manual_spread(ctx, name):
                yield Finding(
                    "irqbalance", name, Severity.WARN,
                    f"irqbalance is running while {name}'s queue IRQs carry a manual affinity",
                    "irqbalance never reads back what an operator set: it will move these IRQs again within seconds",
                    (f"{len(irqs)} queue IRQs pinned one per CPU" if not moved else f"{len(moved)} IRQ change(s) this session",
                     "irqbalance: running"),
                    {"irqs": float(len(irqs))}, ctx.window.span, (),
                    "systemctl disable --now irqbalance  (or ban these IRQs: nettop set irq ... --ban)",
                    f"{RH} (irqbalance); {MLX}")
            continue
        if len(irqs) < 2 or len(snap.online_cpus) < 2:
            continue
        on0 = []
        for irq in irqs:
            aff = snap.irq_affinity.get(irq)
            cpus = (aff.effective or aff.affinity) if aff else None
            on0.append(cpus == (0,))
        if all(on0):
            local = local_cpus(snap, name)
            known = snap.host_config.irqbalance_running is not None  # None: a capture without `ps`
            yield Finding(
                "irqbalance", name, Severity.WARN,
                (f"no irqbalance, and all {len(irqs)} of {name}'s queue IRQs are on CPU 0" if known
                 else f"all {len(irqs)} of {name}'s queue IRQs are on CPU 0"),
                "CPU 0 does all the NIC's interrupt and softirq work while the other CPUs cannot help",
                (f"{len(irqs)} queue IRQs: effective affinity CPU 0",
                 "irqbalance: not running" if known else "irqbalance: not known (no process list)"),
                {"irqs": float(len(irqs))}, ctx.window.span,
                (f"nettop set irq {name} spread {cpus_text(local)}",), None, f"{RH} (irqbalance, smp_affinity)")


def coalescing(ctx: Context) -> Iterator[Finding]:
    """10. Interrupt rate per queue very high with high hardirq%; or, with a latency target,
    adaptive / high rx-usecs holding packets back."""
    w, snap = ctx.window, ctx.snap
    # the CPUs busy with hardirqs, not the loads of all: each NIC's 128 peak CPUs are
    # looked up in it (one without figures is not in it: the floor is above 0)
    loads = w.cpu_loads().at_least(1, T.HARDIRQ_HIGH_PCT)
    target = ctx.config.latency_target_ms
    for name in nics(snap):
        dev = snap.devices.get(name)
        co = dev.coalesce if dev else None
        worst: tuple[float, int, int] | None = None
        irqs = queue_irqs(snap, name)
        elapsed, cpus = w.elapsed, w.cpus  # once, not per IRQ: 4 x 128 of them a tick
        for irq, peak in zip(irqs, w.irq_peaks(irqs)):
            if peak is None:
                continue
            total = peak[0] / elapsed
            if total < T.IRQ_HIGH_PER_S:
                continue
            cpu = cpus[peak[1]]
            if cpu in loads and (worst is None or total > worst[0]):
                worst = (total, irq, cpu)
        if worst is not None and target is None:
            total, irq, cpu = worst
            if co is not None and "adaptive-rx" in co and not co.get("adaptive-rx"):
                fix = f"nettop set coalesce {name} adaptive-rx=on"
            else:
                usecs = int(co.get("rx-usecs", 0)) if co else 0
                fix = f"nettop set coalesce {name} rx-usecs={max(50, 2 * usecs)}"
            yield Finding(
                "coalescing", name, Severity.WARN,
                f"IRQ {irq} of {name} fires {rate(total)} with {loads[cpu][1]:.0f} % hardirq on CPU {cpu}",
                "each interrupt costs a context switch; batching a few µs of packets per interrupt frees the CPU",
                (f"IRQ {irq}: {rate(total)} on CPU {cpu}", f"CPU {cpu} hardirq {loads[cpu][1]:.0f} %",
                 f"coalescing: {dict(co) if co else 'unknown'}"),
                {"irq_per_s": total, "hardirq_pct": loads[cpu][1]}, w.span, (fix,), None, f"{INTEL}; {RH}")
            continue
        if target is not None and co is not None:
            adaptive = bool(co.get("adaptive-rx"))
            usecs = int(co.get("rx-usecs", 0))
            if adaptive or usecs > T.LOW_LATENCY_RX_USECS:
                parts = (["adaptive-rx=off"] if adaptive else []) + [f"rx-usecs={min(usecs, T.LOW_LATENCY_RX_USECS) if usecs else 0}"]
                yield Finding(
                    "coalescing", name, Severity.WARN,
                    f"{name} holds received packets back (adaptive-rx {'on' if adaptive else 'off'}, rx-usecs {usecs}) "
                    f"against a {target:g} ms latency target",
                    "interrupt moderation waits up to rx-usecs (adaptive: more under load) before raising the "
                    "interrupt, which adds straight to every packet's latency",
                    (f"adaptive-rx {'on' if adaptive else 'off'}, rx-usecs {usecs}", f"latency target {target:g} ms"),
                    {"rx_usecs": float(usecs), "adaptive_rx": float(adaptive)}, w.span,
                    (f"nettop set coalesce {name} " + " ".join(parts),), None, f"{INTEL}; {RH}")


RULES = (irq_concentration, numa_locality, irqbalance, coalescing)
