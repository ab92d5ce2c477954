"""The backlog and the NAPI budget: softnet `dropped` and `time_squeeze` rising."""

from __future__ import annotations

import operator
from itertools import compress, repeat
from typing import Iterator, Mapping

from nettop.doctor import thresholds as T
from nettop.doctor.finding import Finding, Severity
from nettop.doctor.rules.common import RH, SCALING, Context, cpus_text, pct, rate, sysctl_int
from nettop.doctor.window import Window


def softnet_drops(ctx: Context) -> Iterator[Finding]:
    """4. softnet `dropped` rising: the per-CPU backlog is full, or RPS sends it all to one CPU."""
    w, snap = ctx.window, ctx.snap
    drops = _above_zero(w, 1)
    total = sum(drops.values())
    if total < T.DROPS_PER_S:
        return
    top = max(drops, key=drops.__getitem__)
    backlog = sysctl_int(snap, "net.core.netdev_max_backlog")
    sn = w.softnet()
    rps = {c: v[3] for c, v in sn.items()}
    rps_total = sum(rps.values())
    imbalanced = rps_total > 0 and rps.get(top, 0.0) / rps_total >= T.RPS_SHARE and len(snap.online_cpus) > 1
    fix = []
    if backlog is not None:
        fix.append(f"nettop set sysctl net.core.netdev_max_backlog {max(2 * backlog, 2048)}")
    title = (f"softnet drops {rate(total)}{_AVG if w.since_boot else ''}: the backlog of CPU {top} overflows"
             + (f" and RPS steers {pct(rps[top] / rps_total)} of its packets there" if imbalanced else ""))
    yield Finding(
        "softnet-drops", "host", Severity.CRIT, title,
        "packets are thrown away after the NIC delivered them: the per-CPU input queue "
        "(netdev_max_backlog) was full" + ("; RPS concentrates the flows on one CPU" if imbalanced else ""),
        (f"dropped {rate(total)} in all, {rate(drops[top])} on CPU {top}",
         f"net.core.netdev_max_backlog = {backlog if backlog is not None else '?'}",
         f"CPUs dropping: {cpus_text(sorted(drops))}")
        + ((f"received_rps on CPU {top}: {rate(rps[top])} of {rate(rps_total)}",) if imbalanced else ())
        + (_per_uptime(w, "drops", total),) * w.since_boot,
        {"dropped_per_s": total, "cpu": float(top), "netdev_max_backlog": float(backlog or 0),
         "rps_share": rps.get(top, 0.0) / rps_total if rps_total else 0.0},
        w.span, tuple(fix), "spread RPS: nettop set rps IFACE all CPUS" if imbalanced else None,
        f"{RH} (softnet_stat column 2, netdev_max_backlog); {SCALING} (RPS)")


def time_squeeze(ctx: Context) -> Iterator[Finding]:
    """5. time_squeeze rising: NAPI polling ran out of budget or time with work left."""
    w, snap = ctx.window, ctx.snap
    sq = _above_zero(w, 2)
    total = sum(sq.values())
    if total < T.SQUEEZE_PER_S:
        return
    top = max(sq, key=sq.__getitem__)
    budget = sysctl_int(snap, "net.core.netdev_budget")
    usecs = sysctl_int(snap, "net.core.netdev_budget_usecs")
    fix = []
    if budget is not None:
        fix.append(f"nettop set sysctl net.core.netdev_budget {max(2 * budget, 600)}")
    if usecs is not None:
        fix.append(f"nettop set sysctl net.core.netdev_budget_usecs {max(2 * usecs, 4000)}")
    yield Finding(
        "time-squeeze", "host", Severity.WARN,
        f"time_squeeze {rate(total)}{_AVG if w.since_boot else ''}: the NET_RX softirq ran out of "
        "budget with packets still waiting",
        "the rest waits for the next softirq round (or ksoftirqd), adding latency; sustained, the ring overflows",
        (f"time_squeeze {rate(total)} in all, {rate(sq[top])} on CPU {top}",
         f"net.core.netdev_budget = {budget if budget is not None else '?'}, "
         f"netdev_budget_usecs = {usecs if usecs is not None else '?'}")
        + ((_per_uptime(w, "time_squeeze events", total),) + _squeeze_share(w, total)) * w.since_boot,
        {"time_squeeze_per_s": total, "cpu": float(top), "netdev_budget": float(budget or 0),
         "netdev_budget_usecs": float(usecs or 0)},
        w.span, tuple(fix), None, f"{RH} (softnet_stat column 3, netdev_budget)")


_AVG = " on average since boot"
_COLUMN = tuple(operator.itemgetter(k) for k in range(4))


def _positive(sn: Mapping[int, tuple[float, ...]], k: int) -> dict[int, float]:
    """CPU -> the k-th softnet rate of the CPUs where it is above 0, in `sn`'s order: in
    C-level passes (two dict comprehensions over 1,024 CPUs were ~0.2 ms a tick)."""
    values = list(map(_COLUMN[k], sn.values()))
    return dict(compress(zip(sn, values), map(operator.lt, repeat(0), values)))


def _above_zero(w: Window, k: int) -> dict[int, float]:
    """`_positive` of the window's softnet figures: from the one column asked for when the
    window can (`Window.softnet_above_zero`), else from every CPU's four."""
    got = w.softnet_above_zero(k)
    return got if got is not None else _positive(w.softnet(), k)


def _per_uptime(w: Window, what: str, per_s: float) -> str:
    """A since-boot figure as counted: the total over the uptime, and per hour of it."""
    hours = w.elapsed / 3600
    return (f"since boot: {per_s * w.elapsed:,.0f} {what} in {hours:.1f} h of uptime = "
            f"{per_s * 3600:,.0f} per hour (a floor: bursts and 32-bit wraps vanish in it)")


def _squeeze_share(w: Window, squeeze_per_s: float) -> tuple[str, ...]:
    """time_squeeze as a share of NET_RX softirq runs: how often a run ended with work left."""
    runs = sum(w.net_rx().values())
    if runs <= 0:
        return ()
    return (f"{pct(squeeze_per_s / runs)} of the NET_RX softirq runs since boot ran out of budget",)


RULES = (softnet_drops, time_squeeze)
