"""Before/after figures around a moment, on timelines built from the scripted host."""

from __future__ import annotations

import dataclasses

import pytest

from nettop.output.before_after import compare, figures, format_value
from nettop.model.rates import compute_rates
from nettop.tui.scripted import synthetic

CHANGE_AT = 20  # the tick at which the change is made


def host(i: int, extra_per_s: int = 1_000_000):
    """The scripted host; from CHANGE_AT on, eth0 receives `extra_per_s` more bytes/s."""
    snap = synthetic(i)
    if i <= CHANGE_AT:
        return snap
    eth0 = snap.links["eth0"]
    links = {**snap.links, "eth0": dataclasses.replace(eth0, rx_bytes=eth0.rx_bytes + (i - CHANGE_AT) * extra_per_s)}
    return dataclasses.replace(snap, links=links)


def series(n: int = 60, extra_per_s: int = 1_000_000):
    snaps = [host(i, extra_per_s) for i in range(n)]
    return [figures(b, compute_rates(a, b)) for a, b in zip(snaps, snaps[1:])]


def test_throughput_after_the_change_is_higher_by_what_was_added():
    t = synthetic(CHANGE_AT).t_wall
    c = compare(series(), t, window_s=10)
    same = compare(series(extra_per_s=0), t, window_s=10)  # the host's own ups and downs
    assert c.n_before == 10 and c.n_after == 10
    assert c.before == same.before
    assert c.after["throughput"] - same.after["throughput"] == pytest.approx(1_000_000)
    assert c.change_pct("throughput") == pytest.approx(
        100 * (c.after["throughput"] - c.before["throughput"]) / c.before["throughput"])


def test_the_interval_holding_the_change_is_in_neither_window():
    s = series()
    t = synthetic(CHANGE_AT).t_wall + 0.5  # made half-way through an interval
    c = compare(s, t, window_s=5)
    before_ts = [f.t_wall for f in s if t - 5 <= f.t_wall < t]
    assert c.n_before == len(before_ts) == 5
    assert c.n_after == 5  # five whole intervals after the mixed one


def test_irq_and_softirq_figures_come_from_the_nic_queues_and_the_busiest_cpu():
    a, b = synthetic(4), synthetic(5)
    r = compute_rates(a, b)
    f = figures(b, r)
    nic = {i for q in b.queue_maps["eth0"].queues for i in q.irqs}
    assert f.irq_s == pytest.approx(sum(r.irqs[i].per_s for i in nic))
    assert f.max_softirq_pct == max(c.softirq_pct for c in r.cpus.values())


def test_unknown_sides_format_as_a_dash_and_have_no_change():
    c = compare(series(5), synthetic(100).t_wall, window_s=10)
    assert c.n_after == 0 and c.after["throughput"] is None and c.change_pct("throughput") is None
    assert format_value("rtt", None) == "–" and format_value("throughput", 1.25e8) == "1.00 Gbit/s"
