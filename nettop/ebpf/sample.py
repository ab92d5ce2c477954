"""What one `EbpfProbes.take()` returns, and its JSON form as per-second rates.

A sample holds plain counts added since the previous take (never cumulative kernel
values) and the time they cover, so a rate is one division and a recording needs no
BPF to be replayed. Under a packet flood the probes are attached for only part of each
interval (duty.py): event counts then cover `window_s`, the probes' own CPU cost covers
all of `elapsed_s`, and the JSON rates divide each by its own span. Rows are per CPU
where the kernel work is per CPU; the JSON form sums them per NAPI instance, IRQ or
drop reason and keeps the per-CPU split next to the sum.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from nettop.ebpf.hist import percentiles

# A NAPI whose polls use the whole budget at least this often is being polled in a loop
# (the softirq keeps it scheduled) rather than re-enabling its interrupt after each poll.
POLLING_SHARE = 0.5


class NapiMode(str, enum.Enum):
    IDLE = "idle"  # not polled in the interval
    INTERRUPT = "interrupt"  # polls finish under budget: the IRQ is re-armed each time
    POLLING = "polling"  # budget exhausted repeatedly: the softirq keeps polling


@dataclass(frozen=True, slots=True)
class NapiCounts:
    """Polls of one NAPI instance on one CPU."""

    ifname: str  # "" for a CPU's backlog NAPI (netif_rx, RPS), which has no device
    ifindex: int
    netns: int  # inode of the device's network namespace (0: no device)
    napi_id: int  # global; netdev netlink maps queues to it
    irq: int | None  # napi->irq where the driver set it
    cpu: int
    polls: int
    work: int  # packets handled
    full: int  # polls that used the whole budget
    empty: int  # polls that found nothing (often tx-completion only)
    budget: int  # the budget of the last poll (the NAPI weight, usually 64)


@dataclass(frozen=True, slots=True)
class IrqCounts:
    """Hard interrupt handler runs of one IRQ on one CPU."""

    irq: int
    name: str  # the handler names, from /proc/irq/N/ ("virtio2-input.0")
    cpu: int
    count: int
    time_ns: int


@dataclass(frozen=True, slots=True)
class SoftirqCounts:
    """NET_RX or NET_TX softirq activity of one CPU, with log2(ns) histograms."""

    cpu: int
    vec: str  # "NET_RX" or "NET_TX"
    raised: int
    runs: int
    timed: int  # runs whose run time was measured (all, unless timing was sampled)
    run_ns: int  # total run time of the timed runs
    waits: int  # raise -> run waits measured (timing may be sampled)
    wait_ns: int
    wait_hist: tuple[int, ...]  # raise -> run latency
    run_hist: tuple[int, ...]  # run time


@dataclass(frozen=True, slots=True)
class DropCounts:
    """Packets freed as dropped, by reason, device and kernel function."""

    reason: str  # "NO_SOCKET", "QDISC_DROP", ... (SKB_DROP_REASON_ prefix removed)
    code: int
    ifname: str  # skb->dev at the drop; "" when the skb had none
    ifindex: int
    netns: int  # inode of skb->dev's network namespace (0: no device)
    location: str  # the function that dropped it ("udp_queue_rcv_one_skb+0x1a4")
    count: int


@dataclass(frozen=True, slots=True)
class ProbeCost:
    """Kernel CPU time spent running one probe program."""

    prog: str  # tracepoint name
    run_ns: int
    runs: int
    missed: int = 0  # runs skipped because the program was already running on that CPU


@dataclass(frozen=True, slots=True)
class EbpfSample:
    """Counts since the previous take(): events over `window_s`, cost over `elapsed_s`."""

    elapsed_s: float
    # Seconds the probes were attached within elapsed_s: equal to it unless the event
    # rate made them attach for 1/duty of each interval only (see duty.py). Event
    # counts cover window_s; the probes' CPU cost covers elapsed_s.
    window_s: float = 0.0
    duty: int = 1
    probes: tuple[str, ...] = ()  # probe groups that were attached
    napi: tuple[NapiCounts, ...] = ()
    hardirq: tuple[IrqCounts, ...] = ()
    softirq: tuple[SoftirqCounts, ...] = ()
    drops: tuple[DropCounts, ...] = ()
    cost: tuple[ProbeCost, ...] = ()
    cost_note: str = ""  # how run-time statistics were enabled, or why not
    read_cpu_s: float = 0.0  # CPU time take() itself used in this process
    errors: tuple[str, ...] = ()  # one line each: what is off and how to fix it
    netns_self: int = 0  # inode of nettop's own network namespace, to tell host devices

    @property
    def cost_us_per_s(self) -> float:
        """CPU time the probes cost the kernel, in µs per second of wall time."""
        return _per_s(sum(c.run_ns for c in self.cost), self.elapsed_s) / 1000.0


def _per_s(n: float, elapsed: float) -> float:
    return n / elapsed if elapsed > 0 else 0.0


def _span(s: EbpfSample) -> float:
    """Seconds the event counts cover."""
    return s.window_s if s.window_s > 0 else s.elapsed_s


def device_label(ifname: str, netns: int, netns_self: int) -> str:
    """"eth0" for a device of nettop's namespace, "eth1@netns:4026532290" otherwise."""
    if not ifname or netns in (0, netns_self):
        return ifname
    return f"{ifname}@netns:{netns}"


def napi_mode(polls: int, full: int) -> NapiMode:
    if polls <= 0:
        return NapiMode.IDLE
    return NapiMode.POLLING if full / polls >= POLLING_SHARE else NapiMode.INTERRUPT


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1000.0, 3)


def _napi_json(s: EbpfSample) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, int, int], list[NapiCounts]] = defaultdict(list)
    for n in s.napi:
        key = (n.ifname, n.napi_id, n.netns, n.cpu if not n.ifname else -1)
        groups[key].append(n)
    out = []
    for (ifname, napi_id, netns, _), rows in sorted(groups.items()):
        polls = sum(r.polls for r in rows)
        work = sum(r.work for r in rows)
        full = sum(r.full for r in rows)
        first = rows[0]
        out.append({
            "ifname": ifname, "napi_id": napi_id, "irq": first.irq, "netns": netns,
            "host_netns": netns in (0, s.netns_self),
            "backlog_cpu": first.cpu if not ifname else None,
            "polls_per_s": _per_s(polls, _span(s)),
            "packets_per_s": _per_s(work, _span(s)),
            "packets_per_poll": work / polls if polls else 0.0,
            "full_budget_share": full / polls if polls else 0.0,
            "empty_share": sum(r.empty for r in rows) / polls if polls else 0.0,
            "budget": max(r.budget for r in rows),
            "mode": napi_mode(polls, full).value,
            "cpus": {str(r.cpu): _per_s(r.polls, _span(s)) for r in rows},
        })
    return out


def _hardirq_json(s: EbpfSample) -> list[dict[str, Any]]:
    groups: dict[int, list[IrqCounts]] = defaultdict(list)
    for r in s.hardirq:
        groups[r.irq].append(r)
    out = []
    for irq, rows in sorted(groups.items()):
        out.append({
            "irq": irq, "name": rows[0].name,
            "count_per_s": _per_s(sum(r.count for r in rows), _span(s)),
            "us_per_s": _per_s(sum(r.time_ns for r in rows), _span(s)) / 1000.0,
            "cpus": {str(r.cpu): _per_s(r.time_ns, _span(s)) / 1000.0 for r in rows},
        })
    return out


def _softirq_json(s: EbpfSample) -> list[dict[str, Any]]:
    out = []
    for r in sorted(s.softirq, key=lambda r: (r.cpu, r.vec)):
        w50, w90, w99 = percentiles(r.wait_hist)
        r50, r90, r99 = percentiles(r.run_hist)
        out.append({
            "cpu": r.cpu, "vec": r.vec,
            "raised_per_s": _per_s(r.raised, _span(s)),
            "runs_per_s": _per_s(r.runs, _span(s)),
            # estimated from the timed runs when timing was sampled
            "run_us_per_s": _per_s(r.run_ns * r.runs / r.timed if r.timed else 0.0,
                                   _span(s)) / 1000.0,
            "timed_share": r.timed / r.runs if r.runs else 1.0,
            "wait_us": {"p50": _us(w50), "p90": _us(w90), "p99": _us(w99),
                        "mean": _us(r.wait_ns / r.waits) if r.waits else None},
            "run_us": {"p50": _us(r50), "p90": _us(r90), "p99": _us(r99),
                       "mean": _us(r.run_ns / r.timed) if r.timed else None},
        })
    return out


def _drops_json(s: EbpfSample) -> dict[str, Any]:
    by_reason: dict[str, int] = defaultdict(int)
    by_dev: dict[str, int] = defaultdict(int)
    for d in s.drops:
        by_reason[d.reason] += d.count
        by_dev[device_label(d.ifname, d.netns, s.netns_self)] += d.count
    return {
        "per_s": _per_s(sum(d.count for d in s.drops), _span(s)),
        "by_reason": {k: _per_s(v, _span(s)) for k, v in sorted(by_reason.items())},
        "by_device": {k: _per_s(v, _span(s)) for k, v in sorted(by_dev.items())},
        "rows": [{"reason": d.reason, "code": d.code, "ifname": d.ifname,
                  "netns": d.netns, "host_netns": d.netns in (0, s.netns_self),
                  "location": d.location, "per_s": _per_s(d.count, _span(s))}
                 for d in sorted(s.drops, key=lambda d: -d.count)],
    }


def to_json(sample: EbpfSample) -> dict[str, Any]:
    """The sample as plain JSON values, every count turned into a per-second rate."""
    return {
        "elapsed_s": sample.elapsed_s,
        "window_s": _span(sample),
        "duty": sample.duty,
        "probes": list(sample.probes),
        "napi": _napi_json(sample),
        "hardirq": _hardirq_json(sample),
        "softirq": _softirq_json(sample),
        "drops": _drops_json(sample),
        "cost": {
            "cpu_us_per_s": sample.cost_us_per_s,
            "events_per_s": _per_s(sum(c.runs for c in sample.cost), sample.elapsed_s),
            "missed": sum(c.missed for c in sample.cost),
            "per_probe_us_per_s": {c.prog: _per_s(c.run_ns, sample.elapsed_s) / 1000.0
                                   for c in sample.cost},
            "read_cpu_ms": sample.read_cpu_s * 1000.0,
            "stats": sample.cost_note,
        },
        "errors": list(sample.errors),
    }
