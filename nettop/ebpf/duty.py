"""Keeping the probes cheap under packet floods: attach them only part of each interval.

Every probe run costs the kernel a raw-tracepoint dispatch plus the program (about
60-120 ns here), and a flood of small packets can cause several runs per packet: on a
veth pair one packet is one NET_RX raise, entry, exit and NAPI poll. Rather than let the
cost grow with the packet rate, the probes are attached at the start of each sampling
interval and detached after 1/duty of it once the event rate passes a budget; counts
are then scaled by the attached time (`EbpfSample.window_s`), which estimates the
rates well for anything that lasts longer than one window (floods, steady load) and
bounds the cost to about the budget. Below the budget the probes stay attached and
every event is counted.
"""

from __future__ import annotations

from nettop.ebpf.sample import EbpfSample

# Probe runs per second before duty cycling starts: ~1 % of one CPU at ~100 ns a run.
EVENTS_PER_S_BUDGET = 100_000
MAX_DUTY = 32
# Interval a rate needs before it may change the duty: a take() right after start()
# covers microseconds, and a dozen events in 16 us (735,000/s) once detached the probes
# for 97 % of the next, real interval. (The sampler's intervals are 0.1 s or more.)
MIN_INTERVAL_S = 0.05


def duty_for(events_per_s: float, budget: float = EVENTS_PER_S_BUDGET) -> int:
    """1 (always attached) or the power of two that brings the rate under `budget`."""
    duty = 1
    while events_per_s > budget * duty and duty < MAX_DUTY:
        duty *= 2
    return duty


def events_in(sample: EbpfSample) -> int:
    """Probe runs behind a sample's counts (works without run-time statistics)."""
    n = sum(r.polls for r in sample.napi)
    n += sum(r.raised + 2 * r.runs for r in sample.softirq)
    n += sum(2 * r.count for r in sample.hardirq)
    n += sum(d.count for d in sample.drops)
    return n


class Window:
    """Seconds the probes were attached since the last `take`."""

    __slots__ = ("_since", "_acc")

    def __init__(self) -> None:
        self._since: float | None = None
        self._acc = 0.0

    @property
    def open(self) -> bool:
        return self._since is not None

    def opened(self, now: float) -> None:
        if self._since is None:
            self._since = now

    def closed(self, now: float) -> None:
        if self._since is not None:
            self._acc += max(0.0, now - self._since)
            self._since = None

    def take(self, now: float) -> float:
        """Attached seconds since the previous take; the window stays as it is."""
        acc = self._acc
        if self._since is not None:
            acc += max(0.0, now - self._since)
            self._since = now
        self._acc = 0.0
        return acc
