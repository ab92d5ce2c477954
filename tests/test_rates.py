"""Rates are pure functions of two snapshots: real elapsed time, wrap, reset, appear/vanish."""

from nettop.model.counters import U32
from nettop.model.rates import Presence, compute_rates
from nettop.model.snapshot import (
    CpuTimes, InterruptTable, Irq, LinkStats, QdiscStats, QueueCounters, QueueStats,
    Snapshot, SoftirqCounts, SoftnetRow,
)


def link(name, ifindex=2, rx=0, tx=0, rxp=0, txp=0, drop=0):
    return LinkStats(name, ifindex, rx, tx, rxp, txp, 0, 0, drop, 0)


def snap(t, cpus=(0, 1), links=(), irqs=(), softirq=None, softnet=None, times=None, qstats=None, qdiscs=None):
    return Snapshot(
        t_mono=t, t_wall=1_700_000_000 + t, host="h", kernel="k", online_cpus=tuple(cpus),
        interrupts=InterruptTable(tuple(cpus), {i.irq: i for i in irqs}),
        softirqs=softirq or {}, cpu_times=times or {}, softnet=softnet or {},
        links={l.name: l for l in links}, queue_stats=qstats or {}, qdiscs=qdiscs or {},
    )


def test_rates_use_real_elapsed_time_not_the_nominal_interval():
    a = snap(10.0, links=[link("eth0", rx=1000)])
    b = snap(12.5, links=[link("eth0", rx=1000 + 2500)])  # a tick that came 1.5 s late
    r = compute_rates(a, b)
    assert r.elapsed_s == 2.5
    assert r.links["eth0"].rx_bytes_per_s == 1000


def test_interface_that_appears_or_vanishes_or_is_recreated_is_marked():
    a = snap(0, links=[link("old", 3), link("veth0", 5, rx=100)])
    b = snap(1, links=[link("new", 4), link("veth0", 9, rx=5)])  # veth0 deleted and re-made
    r = compute_rates(a, b)
    assert r.links["old"].presence is Presence.GONE
    assert r.links["new"].presence is Presence.NEW
    assert r.links["veth0"].presence is Presence.NEW and r.links["veth0"].rx_bytes_per_s is None


def test_irq_counts_wrap_at_32_bits_per_cpu():
    a = snap(0, irqs=[Irq(40, "PCI-MSIX", "1-edge", "mlx5_comp0@pci:0000:81:00.0", (U32 - 100, 7), U32 - 93)])
    b = snap(2, irqs=[Irq(40, "PCI-MSIX", "1-edge", "mlx5_comp0@pci:0000:81:00.0", (300, 7), 307)])
    r = compute_rates(a, b).irqs[40]
    assert r.per_cpu_per_s == {0: 200.0, 1: 0.0}
    assert r.per_s == 200.0 and not r.reset


def test_irq_count_that_went_back_is_a_reset_and_a_cpu_that_came_online_has_no_rate_yet():
    name = "mlx5_comp0@pci:0000:81:00.0"
    a = snap(0, irqs=[Irq(40, "PCI-MSIX", "1-edge", name, (5000, 7), 5007)])
    b = snap(1, irqs=[Irq(40, "PCI-MSIX", "1-edge", name, (30, 9), 39)])  # CPU 0's count restarted
    r = compute_rates(a, b).irqs[40]
    assert r.per_cpu_per_s == {0: 30.0, 1: 2.0} and r.reset
    grown = snap(1, cpus=(0, 1, 2), irqs=[Irq(40, "PCI-MSIX", "1-edge", name, (5100, 8, 4), 5112)])
    r = compute_rates(a, grown).irqs[40]
    assert r.per_cpu_per_s == {0: 100.0, 1: 1.0} and r.per_s == 101.0 and not r.reset


def test_cpu_offlined_between_samples_is_gone_and_the_rest_still_computes():
    t = lambda cpu, k: CpuTimes(cpu, 10 * k, 0, 10 * k, 70 * k, 0, 5 * k, 5 * k, 0)  # noqa: E731
    a = snap(0, cpus=(0, 1), times={0: t(0, 1), 1: t(1, 1)},
             softirq={0: SoftirqCounts(0, 10, 1), 1: SoftirqCounts(1, 10, 1)})
    b = snap(1, cpus=(0,), times={0: t(0, 2)}, softirq={0: SoftirqCounts(0, 110, 3)})
    r = compute_rates(a, b)
    assert r.cpus[1].presence is Presence.GONE
    c0 = r.cpus[0]
    assert c0.softirq_pct == 5.0 and c0.irq_pct == 5.0 and c0.idle_pct == 70.0
    assert c0.net_rx_per_s == 100 and c0.net_tx_per_s == 2


def test_softnet_rates_and_a_reset_counter_is_flagged_not_negative():
    a = snap(0, softnet={0: SoftnetRow(0, 1000, 5, 7, 0, 0, 0, True)})
    b = snap(1, softnet={0: SoftnetRow(0, 1500, 2, 9, 40, 0, 3, True)})  # dropped went backwards
    c = compute_rates(a, b).cpus[0]
    assert c.softnet_processed_per_s == 500 and c.time_squeeze_per_s == 2
    assert c.received_rps_per_s == 40 and c.backlog == 3
    assert c.softnet_dropped_per_s == 2 and c.reset


def test_per_queue_and_qdisc_rates():
    qa = {"eth0": QueueStats("eth0", (QueueCounters("rx", 0, 100, 1000),), "netdev-qstats")}
    qb = {"eth0": QueueStats("eth0", (QueueCounters("rx", 0, 300, 5000), QueueCounters("rx", 1, 9, 9)), "netdev-qstats")}
    da = {"eth0": (QdiscStats("eth0", "mq", "1:", "root", bytes=0, packets=0, drops=1),)}
    db = {"eth0": (QdiscStats("eth0", "mq", "1:", "root", bytes=800, packets=8, drops=5),
                   QdiscStats("eth0", "pfifo_fast", "0:", "1:1"))}
    a = snap(0, links=[link("eth0")], qstats=qa, qdiscs=da)
    b = snap(2, links=[link("eth0")], qstats=qb, qdiscs=db)
    r = compute_rates(a, b)
    q0, q1 = r.links["eth0"].queues
    assert (q0.packets_per_s, q0.bytes_per_s) == (100, 2000)
    assert q1.packets_per_s is None  # new queue: no rate yet
    mq, child = r.qdiscs["eth0"]
    assert (mq.bytes_per_s, mq.drops_per_s) == (400, 2) and child.drops_per_s is None


def test_snapshots_out_of_order_are_refused():
    import pytest
    with pytest.raises(ValueError, match="time order"):
        compute_rates(snap(5), snap(5))


# --- the per-IRQ fast path (1,024 CPUs x hundreds of queue IRQs) ---------------------

import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

from nettop.model.rates import PerCpuRates, _one_irq  # noqa: E402

_COUNT = st.one_of(st.integers(0, U32 - 1), st.sampled_from([0, 1, U32 - 1, U32, -1, 1 << 70]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_COUNT, _COUNT, st.booleans()), min_size=1, max_size=12),
       st.floats(0.01, 100.0))
def test_the_fast_irq_path_gives_what_the_field_by_field_path_gives(cols, elapsed):
    name = "mlx5_comp0@pci:0000:81:00.0"
    cpus = tuple(range(len(cols)))
    ac = tuple(x for x, _, _ in cols)
    bc = tuple(x if same else y for x, y, same in cols)  # many CPUs where nothing moved
    a, b = Irq(40, "PCI-MSIX", "1-edge", name, ac, None), Irq(40, "PCI-MSIX", "1-edge", name, bc, None)
    fast_p: list = []
    slow_p: list = []
    fast = _one_irq(a, b, cpus, cpus, elapsed, fast_p, frozenset(cpus))
    slow = _one_irq(a, b, cpus, cpus, elapsed, slow_p, None)
    assert dict(fast.per_cpu_per_s.items()) == dict(slow.per_cpu_per_s.items())
    assert (fast.per_s, fast.reset, fast_p) == (slow.per_s, slow.reset, slow_p)


def test_per_cpu_rates_read_as_every_online_cpu_and_store_only_where_it_fired():
    a = snap(0, cpus=(0, 1, 2, 5), irqs=[Irq(40, "PCI-MSIX", "1-edge", "eth0-rx-0", (10, 20, 30, 40), 100)])
    b = snap(2, cpus=(0, 1, 2, 5), irqs=[Irq(40, "PCI-MSIX", "1-edge", "eth0-rx-0", (10, 220, 30, 40), 300)])
    per_cpu = compute_rates(a, b).irqs[40].per_cpu_per_s
    assert isinstance(per_cpu, PerCpuRates)
    assert per_cpu == {0: 0.0, 1: 100.0, 2: 0.0, 5: 0.0} and list(per_cpu) == [0, 1, 2, 5]
    assert per_cpu.fired() == {1: 100.0} and per_cpu[5] == 0.0 and 3 not in per_cpu and len(per_cpu) == 4
    with pytest.raises(KeyError):
        per_cpu[3]
