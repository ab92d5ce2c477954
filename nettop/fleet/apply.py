"""`nettop apply FILE`: a plan from `nettop persist`, checked against this host, then applied.

The layout is checked first, and a plan made for other hardware is refused with one
line: the number of online CPUs and NUMA nodes, every interface found again (hardware
NICs by driver and PCI address, else by MAC, a virtual device without either by name)
on the NUMA node the plan recorded. Then each item becomes a Change on this host's
names (a renamed NIC, an IRQ number that moved at boot) and goes through the tuning
workflow (`nettop.actions.workflow.run_plans`, as `nettop set` does), so
everything `apply` writes is journaled and undone by `nettop undo` or `nettop restore`.
Items already as planned are reported and not written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from nettop.actions.base import ActionError, Change, Plan, from_record
from nettop.fleet.plan import Iface, Item, PlanError, TuningPlan, iface_identity, numa_nodes, online_cpus


@dataclass(frozen=True)
class Resolved:
    plans: list[Plan]  # what differs, to write
    already: list[str]  # items already as planned
    notes: list[str]  # how interfaces and IRQs were matched


def _match(want: Iface, local: dict[str, Iface]) -> tuple[str, str]:
    """(local name, how it matched) or PlanError."""
    if want.hardware:
        for name, have in local.items():
            if have.bus_info == want.bus_info and have.driver == want.driver:
                return name, f"{want.name} = {name} (driver {want.driver}, PCI {want.bus_info})"
        raise PlanError(f"no {want.driver} NIC at PCI {want.bus_info} on this host (the plan's {want.name}): "
                        "refusing a plan made for other hardware")
    if want.mac and want.mac != "00:00:00:00:00:00":
        for name, have in local.items():
            if have.mac == want.mac:
                return name, f"{want.name} = {name} (MAC {want.mac})"
    if want.name in local and local[want.name].driver == want.driver:
        return want.name, f"{want.name} matched by name only (virtual, {want.driver or 'no driver'}, MAC changed)"
    raise PlanError(f"interface {want.name} ({want.driver or 'virtual'}, MAC {want.mac}) is not on this host")


def _irq_for(item: Item, ifname: str | None) -> int:
    from nettop.collectors.interrupts import read_interrupts
    from nettop.collectors.queue_irqs import map_queues
    from nettop.kernel.sysroot import LIVE

    table, _ = read_interrupts(LIVE)
    if ifname and item.irq_queue:
        qmap, _ = map_queues(LIVE, ifname, table, None)
        for q in qmap.queues:
            if f"{q.kind}-{q.index}" == item.irq_queue and q.irqs:
                return q.irqs[0]
        raise PlanError(f"{ifname} has no queue {item.irq_queue} with an IRQ here (the plan moved its IRQ)")
    for irq, entry in table.irqs.items():
        if item.irq_name and entry.name == item.irq_name:
            return irq
    raise PlanError(f"no IRQ named {item.irq_name!r} on this host (the plan moved it)")


def resolve(plan: TuningPlan, tuner: Any) -> Resolved:
    """The plan on this host's names, validated; PlanError (one line) when it does not fit."""
    cpus, nodes = online_cpus(), numa_nodes()
    if len(cpus) != len(plan.cpus_online) or nodes != plan.numa_nodes:
        raise PlanError(f"the plan was made on {plan.host} with {len(plan.cpus_online)} CPUs on {plan.numa_nodes} "
                        f"NUMA node(s); this host has {len(cpus)} on {nodes}: refusing (persist one on this layout)")
    local = {n: iface_identity(n) for n in sorted(os.listdir("/sys/class/net"))}
    names: dict[str, str] = {}
    notes: list[str] = []
    for pname, want in plan.interfaces.items():
        name, how = _match(want, local)
        have = local[name]
        if want.numa_node is not None and have.numa_node is not None and want.numa_node != have.numa_node:
            raise PlanError(f"{name} is on NUMA node {have.numa_node}, the plan's {pname} was on {want.numa_node}: "
                            "its CPU masks would point at the far node; refusing")
        names[pname] = name
        notes.append(how)
    changes: list[Change] = []
    for item in plan.items:
        params = dict(item.params)
        local_if = names.get(item.iface) if item.iface else None
        if "ifname" in params:
            if local_if is None:
                raise PlanError(f"item {item.text[:80]!r} names an interface the plan does not describe")
            params["ifname"] = local_if
        if item.kind == "irq_affinity":
            irq = _irq_for(item, local_if)
            if irq != params.get("irq"):
                notes.append(f"IRQ {params.get('irq')} of {item.iface} {item.irq_queue or item.irq_name} is IRQ {irq} here")
            params["irq"] = irq
        try:
            setting = from_record({"kind": item.kind, "params": params})
        except ActionError as exc:
            raise PlanError(f"item {item.text[:80]!r}: {exc}") from None
        changes.append(Change(setting, item.value))
    try:
        plans = tuner.plan(changes)
    except ActionError as exc:
        raise PlanError(f"this host cannot take the plan: {exc}") from None
    todo, already = [], []
    for p in plans:
        if p.setting.matches(p.value, p.before):
            already.append(f"{p.setting.key}: already {p.setting.show(p.before)}")
        else:
            todo.append(p)
    return Resolved(todo, already, notes)


def apply(path: str, tuner: Any, dry_run: bool, yes: bool, confirm: float | None = None) -> tuple[int, list[str]]:
    """(exit status, lines to print)."""
    from nettop.fleet.plan import load

    plan = load(path)
    r = resolve(plan, tuner)
    lines = [f"plan from {plan.host}: {len(plan.items)} item(s)"] + [f"match: {n}" for n in r.notes]
    lines += r.already
    if not r.plans:
        return 0, lines + ["nothing to apply: this host is as planned"]
    if dry_run:
        return 0, lines + [f"would set {p.text}" + (f" (needs --yes: {p.confirm})" if p.confirm else "")
                           for p in r.plans]
    from nettop.actions.tuner import KernelRefused
    from nettop.actions.workflow import run_plans

    from nettop.actions.confirm_tty import cli_guard, keep_or_revert
    from nettop.actions.trial import install_exit_revert

    # the one workflow, as `nettop set` takes it: a change on the SSH session's path on trial
    install_exit_revert()  # a hang-up while a trial is made or counts down reverts it
    out = run_plans(tuner, r.plans, confirmed=yes, guard=cli_guard(confirm))
    if out.trial is not None and out.error is None and not keep_or_revert(out.trial):
        return 3, lines + [f"not kept: {out.trial.message}"]
    if out.pending:
        raise PlanError("needs --yes: " + "; ".join(out.confirm))
    if out.error is not None:
        raise (KernelRefused if out.refused else ActionError)(out.error)
    results = out.results
    lines += [f"applied {res.line()}" for res in results]
    bad = [res for res in results if not res.verified]
    return (1 if bad else 0), lines
