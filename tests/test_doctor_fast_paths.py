"""The doctor's fast paths give what the plain ones give, bit for bit and in the same order.

Each fast path (one softnet column instead of every CPU's four, NET_RX without a tuple
per CPU, ...) is compared with the per-CPU walk (ARRAYS_FROM out of reach) and with the
arrays' full figures, on snapshots whose counts go forwards, backwards, wrap, pass 50 bits
or int64, and whose CPUs come and go between the two samples.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st
from test_count_matrix import _COUNT, _snap, _tables
from test_cpu_columns import _BASE, _WIDE, _big, _pair

from nettop.doctor import window as W
from nettop.doctor.rules import softnet
from nettop.doctor.window import Window
from nettop.model.snapshot import CpuTimes, InterruptTable, Snapshot, SoftirqCounts, SoftnetRow
from nettop.model.timeline import Point

_ELAPSED = st.sampled_from([1.0, 0.1, 0.7, 3.3333333, 0.30000000000000004, 1e-9, 5.0])


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[Snapshot, Snapshot]:
    """Two samples of 1-12 CPUs: mostly the same CPUs in both (the fast paths' case), each
    field plain on most CPUs and now and then backwards, wrapped or beyond 50 bits."""
    cpus = sorted(draw(st.sets(st.integers(0, 40), min_size=1, max_size=12)))
    base = _WIDE if draw(st.integers(0, 9)) == 0 else _BASE
    same = draw(st.integers(0, 3)) > 0
    odd = draw(st.integers(0, 2))  # 0: every field of every CPU plain; else some are not

    def rows(make, nfields: int, step: int) -> tuple[dict, dict]:
        a, b = {}, {}
        for cpu in cpus:
            plain = odd == 0 or draw(st.integers(0, 4)) > 0
            pairs = [draw(_pair(step, base, plain)) for _ in range(nfields)]
            if same or draw(st.integers(0, 5)):
                a[cpu] = make(cpu, [p[0] for p in pairs])
            if same or draw(st.integers(0, 5)):
                b[cpu] = make(cpu, [p[1] for p in pairs])
        return a, b

    ta, tb = rows(lambda c, v: CpuTimes(c, *v), 8, draw(st.sampled_from([0, 2, 20, 200])))
    sa, sb = rows(lambda c, v: SoftirqCounts(c, *v), 2, 10_000)
    na, nb = rows(lambda c, v: SoftnetRow(c, *v, backlog=0), 5, draw(st.sampled_from([0, 1, 10_000])))
    elapsed = draw(_ELAPSED)
    prev = Snapshot(t_mono=1.0, t_wall=1.0, host="h", kernel="k", online_cpus=tuple(cpus),
                    interrupts=InterruptTable(()), softirqs=sa, cpu_times=ta, softnet=na)
    cur = Snapshot(t_mono=1.0 + elapsed, t_wall=2.0, host="h", kernel="k", online_cpus=tuple(cpus),
                   interrupts=InterruptTable(()), softirqs=sb, cpu_times=tb, softnet=nb)
    return prev, cur


def _window(prev: Snapshot, cur: Snapshot) -> Window:
    return Window([Point(prev, None), Point(cur, None)])


def _same(got: object, want: object) -> None:
    # repr: floats bit for bit (-0.0 is not 0.0), Python floats (not numpy's), same order
    assert repr(got) == repr(want)


def _softnet_answers(prev: Snapshot, cur: Snapshot) -> tuple[list, object]:
    """(what the rules read of softnet above zero, for columns 0-3; net_rx)."""
    got = []
    for k in range(4):
        w = _window(prev, cur)
        fast = w.softnet_above_zero(k)
        got.append(fast if fast is not None else softnet._positive(w.softnet(), k))
    return got, _window(prev, cur).net_rx()


@settings(max_examples=400, deadline=None)
@given(_pairs())
def test_one_softnet_column_and_net_rx_are_those_of_every_cpus_figures(pair):
    prev, cur = pair
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(W, "ARRAYS_FROM", 1 << 30)  # the per-CPU walk: the reference
        w = _window(prev, cur)
        want = ([softnet._positive(w.softnet(), k) for k in range(4)], w.net_rx())
        assert _window(prev, cur).softnet_above_zero(1) is None  # (a small host: no arrays)
        mp.setattr(W, "ARRAYS_FROM", 1)
        got = _softnet_answers(prev, cur)
        w = _window(prev, cur)  # the arrays' full figures
        full = ([softnet._positive(w.softnet(), k) for k in range(4)], w.net_rx())
    _same(got, want)
    _same(full, want)


def test_a_big_host_reads_one_softnet_column_even_with_another_field_backwards():
    """At 1,024 CPUs the column is read from the arrays (not None), a CPU whose other
    field went backwards included, and gives the per-CPU walk's figures."""
    prev = _big(1024, 10.0, 1)
    cur = _big(1024, 15.0, 2)
    net = dict(cur.softnet)
    net[6] = SoftnetRow(6, 400, 9, 3, 0, 0, backlog=0)  # processed backwards, the rest forwards
    cur = dataclasses.replace(cur, softnet=net)
    w = _window(prev, cur)
    fast = [w.softnet_above_zero(k) for k in range(4)]
    assert fast[0] is None and fast[1] is not None and fast[2] is not None  # column 0 went backwards
    assert fast[1][6] == 9 / 5.0 and list(fast[2])[:3] == [0, 1, 2]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(W, "ARRAYS_FROM", 1 << 30)
        slow = _window(prev, cur)
        _same((fast[1], fast[2], w.net_rx()),
              (softnet._positive(slow.softnet(), 1), softnet._positive(slow.softnet(), 2), slow.net_rx()))


# --- answers kept across ticks (rules/common.local_cpus, rules/cpu_irq._far_irqs) -------


def _plain_local_cpus(snap, ifname: str) -> tuple[int, ...]:
    """local_cpus as it was before it was kept: worked out on every call."""
    online = snap.online_cpus
    t = snap.tuning
    nic = t.nics.get(ifname) if t is not None else None
    if nic is not None and nic.local_cpus:
        local = tuple(c for c in nic.local_cpus if c in set(online))
        if local:
            return local
    dev = snap.devices.get(ifname)
    if t is not None and dev is not None and dev.numa_node is not None and t.cpu_nodes:
        local = tuple(c for c in online if t.cpu_nodes.get(c) == dev.numa_node)
        if local:
            return local
    return tuple(online)


def _plain_far_irqs(snap, name: str, local: frozenset[int]) -> list[int]:
    from nettop.doctor.rules.common import queue_irqs

    far = []
    for irq in queue_irqs(snap, name):
        aff = snap.irq_affinity.get(irq)
        cpus = (aff.effective or aff.affinity) if aff else None
        if cpus and local.isdisjoint(cpus):
            far.append(irq)
    return far


_CPU_LISTS = st.one_of(st.none(), st.just(()), st.lists(st.integers(0, 7), max_size=5).map(tuple))


@st.composite
def _ticks(draw: st.DrawFn) -> list:
    """A run of ticks of a host with NICs eth0 and eth1: each tick keeps some of the last
    tick's objects (online CPUs, tuning, devices, affinities, queue maps) and makes others
    anew, equal to the old ones or not, as a reader does."""
    import types

    from nettop.model.snapshot import DeviceConfig, HostTuning, IrqAffinity, NicTuning, QueueIrqs, QueueMap

    def tuning() -> HostTuning | None:
        if not draw(st.integers(0, 5)):
            return None
        nodes = draw(st.dictionaries(st.integers(0, 7), st.integers(0, 2), max_size=8))
        nics = {n: NicTuning(n, local_cpus=draw(_CPU_LISTS)) for n in ("eth0", "eth1") if draw(st.booleans())}
        return HostTuning(cpu_nodes=nodes, nics=nics)

    def devices() -> dict:
        return {n: DeviceConfig(n, numa_node=draw(st.sampled_from([None, 0, 1, 2, True, 1.0])))
                for n in ("eth0", "eth1") if draw(st.integers(0, 4))}

    def aff(irq: int) -> IrqAffinity:
        return IrqAffinity(irq, draw(_CPU_LISTS), draw(_CPU_LISTS), None)

    def queue_maps() -> dict:
        out = {}
        for k, n in enumerate(("eth0", "eth1")):
            irqs = draw(st.lists(st.integers(10 * k, 10 * k + 12), max_size=4, unique=True))
            out[n] = QueueMap(n, tuple(QueueIrqs("combined", i, (irq,)) for i, irq in enumerate(irqs)), "none")
        return out

    online = tuple(sorted(draw(st.sets(st.integers(0, 7)))))
    t, devs, maps = tuning(), devices(), queue_maps()
    affs = {irq: aff(irq) for irq in range(24) if draw(st.integers(0, 5))}
    ticks = []
    for _ in range(draw(st.integers(1, 6))):
        if not draw(st.integers(0, 3)):
            online = tuple(sorted(draw(st.sets(st.integers(0, 7)))))
        if not draw(st.integers(0, 3)):
            t = tuning()
        if not draw(st.integers(0, 2)):
            devs = devices()
        if not draw(st.integers(0, 3)):
            maps = queue_maps()
        affs = {irq: (a if draw(st.integers(0, 3)) else aff(irq)) for irq, a in affs.items()}
        ticks.append(types.SimpleNamespace(online_cpus=online, tuning=t, devices=dict(devs),
                                           queue_maps=maps, irq_affinity=dict(affs)))
    return ticks


@settings(max_examples=400, deadline=None)
@given(_ticks())
def test_kept_local_cpus_and_far_irqs_are_those_worked_out_afresh(ticks):
    from nettop.doctor.rules import common, cpu_irq

    for snap in ticks:
        for name in ("eth0", "eth1", "eth9"):
            local = common.local_cpus(snap, name)
            assert local == _plain_local_cpus(snap, name)
            assert common.local_cpus(snap, name) == local  # kept: asked again
            for _ in range(2):  # worked out, then kept
                got_set = cpu_irq._local_set(snap.online_cpus, local)
                assert got_set == (frozenset(local), sorted(frozenset(local)), frozenset(local) >= set(snap.online_cpus))
                got_set[1].append(-1)  # a caller's list is its own
            other = tuple(range(9))  # the same local CPUs against other online CPUs
            assert cpu_irq._local_set(other, local)[2] == (frozenset(local) >= set(other))
            got = cpu_irq._far_irqs(snap, name, frozenset(local))
            assert got == _plain_far_irqs(snap, name, frozenset(local))
            assert cpu_irq._far_irqs(snap, name, frozenset(local)) == got
            got.append(-1)  # a caller's list is its own
    assert len(common._LOCAL) <= common._LOCAL_KEEP and len(cpu_irq._FAR_IRQS) <= cpu_irq._FAR_KEEP
    assert len(cpu_irq._LOCAL_SETS) <= cpu_irq._FAR_KEEP


# --- Window.cpu_loads: cpu_pct one CPU at a time, or above a floor ------------------------

_FLOORS = (-1.0, 0.0, 1e-300, 10.0, 50.0, 100.0, 150.0)


def _loads_answers(prev: Snapshot, cur: Snapshot, first_pct: bool) -> tuple[list, list]:
    w = _window(prev, cur)
    if first_pct:  # the dict already there: the loads read it
        w.cpu_pct()
    loads = w.cpu_loads()
    asked = sorted(set(cur.cpu_times) | set(prev.cpu_times) | {-1, 999})
    return [loads.get(c) for c in asked], [loads.at_least(k, f) for k in range(3) for f in _FLOORS]


@settings(max_examples=400, deadline=None)
@given(_pairs(), st.booleans())
def test_cpu_loads_are_cpu_pct_one_cpu_at_a_time_and_above_a_floor(pair, first_pct):
    prev, cur = pair
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(W, "ARRAYS_FROM", 1 << 30)  # the per-CPU walk: the reference
        pct = _window(prev, cur).cpu_pct()
        asked = sorted(set(cur.cpu_times) | set(prev.cpu_times) | {-1, 999})
        want = ([pct.get(c) for c in asked], [{c: v for c, v in pct.items() if v[k] >= f}
                                              for k in range(3) for f in _FLOORS])
        _same(_loads_answers(prev, cur, first_pct), want)
        mp.setattr(W, "ARRAYS_FROM", 1)
        _same(_loads_answers(prev, cur, first_pct), want)


def test_a_big_hosts_loads_judge_a_cpu_beyond_50_bits_and_a_missing_one():
    prev = _big(1024, 10.0, 1)
    # CPU 11's and 12's steps add up beyond int64: only Python's ints get their figures
    # right (in int64 CPU 11's total wraps below 0, CPU 12's to a small one: 100+ % hardirq)
    cur = _big(1024, 15.0, 2, times={3: CpuTimes(3, (1 << 60) + 5, 3, 40, 1060, 1, 4, 10, 0),
                                     9: CpuTimes(9, 1 << 51, 0, 0, 0, 0, 90, 9, 0),
                                     11: CpuTimes(11, *[(1 << 62) + 50] * 8),
                                     12: CpuTimes(12, *[1 << 62] * 4, 0, 5000, 50, 0)})
    del prev.cpu_times[8]  # built for this test only: no snapshot is changed after its read
    w = _window(prev, cur)
    loads = w.cpu_loads()
    a = loads._arrays_or_none()
    assert a is not None and a.exact is not None  # the arrays, with rows beyond 50 bits
    pct = _window(prev, cur).cpu_pct()
    _same([loads.get(c) for c in range(1030)], [pct.get(c) for c in range(1030)])
    for k in range(3):
        for f in _FLOORS:
            _same(loads.at_least(k, f), {c: v for c, v in pct.items() if v[k] >= f})
    assert loads.get(8) is None and loads.get(9) is not None and 9 in loads.at_least(0, 0.0)
    assert 11 in loads.at_least(1, 12.5) and 11 in loads.at_least(2, 24.0) and 12 not in loads.at_least(1, 1.0)


# --- Window.irq_sum_top: a NIC's interrupts in all and where most landed -----------------


def _plain_top(w: Window, irqs: list[int]) -> tuple[int, int, int] | None:
    """What irq_concentration read of `irq_sum` before irq_sum_top."""
    acc = w.irq_sum(irqs)
    if not acc:
        return None
    return sum(acc), acc.index(max(acc)), acc[acc.index(max(acc))]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 9), st.integers(1, 6), st.data(), st.floats(0.05, 50.0))
def test_irq_sum_top_is_the_sum_and_first_peak_of_irq_sum(ncpu, nirq, data, elapsed):
    """On the matrix (the counts that moved, the whole matrix) and on per-IRQ tuples, with
    ties for the most (the first CPU wins), wraps, resets, an IRQ named twice or unknown."""
    cpus = tuple(range(0, 2 * ncpu, 2))
    count = st.one_of(_COUNT, st.integers(0, 3))  # small counts: ties
    a_rows = [data.draw(st.lists(count, min_size=ncpu, max_size=ncpu)) for _ in range(nirq)]
    b_rows = [[x if data.draw(st.booleans()) else data.draw(count) for x in row] for row in a_rows]
    am, at = _tables(cpus, a_rows)
    bm, bt = _tables(cpus, b_rows)
    asked = [list(am.irqs), list(am.irqs)[::2] + [999], list(am.irqs)[:1] * 2, [999], [],
             data.draw(st.lists(st.sampled_from(list(am.irqs)), max_size=8))]
    for a, b in ((at, bt), (am, bm)):
        for sparse in (1 << 30, 0):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(W, "SPARSE_PER_ROW", sparse)
                w = Window([Point(_snap(0.0, a), None), Point(_snap(elapsed, b), None)], window_s=100.0)
                got = [w.irq_sum_top(irqs) for irqs in asked]
                w = Window([Point(_snap(0.0, a), None), Point(_snap(elapsed, b), None)], window_s=100.0)
                want = [_plain_top(w, irqs) for irqs in asked]
            assert got == want
            assert all(type(v) is int for top in got if top is not None for v in top)


# --- a NIC's queues kept while the reader hands the same objects (rules/nic.py) ----------


def _plain_unsteered(queues) -> list | None:
    from nettop.doctor.rules.common import mask_cpus

    txq = [q for q in queues if q.kind == "tx"]
    if len(txq) < 2 or any(q.xps_cpus is None for q in txq):
        return None
    if any(mask_cpus(q.xps_cpus) for q in txq):
        return None
    return txq


@st.composite
def _queue_ticks(draw: st.DrawFn) -> list:
    """(QueueMap or None, DeviceConfig queue settings) of one NIC tick after tick, each
    kept from the last tick or made anew (equal or not)."""
    from nettop.model.snapshot import QueueConfig, QueueIrqs, QueueMap

    def qmap() -> QueueMap | None:
        if not draw(st.integers(0, 5)):
            return None
        queues = tuple(QueueIrqs(draw(st.sampled_from(["rx", "tx", "combined"])), i,
                                 tuple(draw(st.lists(st.integers(30, 40), max_size=2))))
                       for i in range(draw(st.integers(0, 5))))
        return QueueMap("eth0", queues, "none")

    def settings_() -> tuple:
        return tuple(QueueConfig(draw(st.sampled_from(["rx", "tx"])), i,
                                 xps_cpus=draw(st.sampled_from([None, "", "0", "00000000,00000000", "f", "1,0"])))
                     for i in range(draw(st.integers(0, 4))))

    qm, queues, ticks = qmap(), settings_(), []
    for _ in range(draw(st.integers(1, 6))):
        if not draw(st.integers(0, 2)):
            qm = qmap()
        if not draw(st.integers(0, 2)):
            queues = settings_()
        ticks.append((qm, queues))
    return ticks


@settings(max_examples=300, deadline=None)
@given(_queue_ticks())
def test_kept_rx_queue_irqs_and_unsteered_tx_queues_are_those_worked_out_afresh(ticks):
    from nettop.doctor.rules import nic

    for qm, queues in ticks:
        want_q = [q for q in qm.queues if q.kind in ("rx", "combined") and q.irqs] if qm else []
        want = (want_q, [i for q in want_q for i in q.irqs])
        for _ in range(2):  # worked out, then kept
            got = nic._rx_queue_irqs("eth0", qm)
            assert got == want
            got[0].append(None)  # a caller's lists are its own
            got[1].append(-1)
            txq = nic._unsteered_tx_queues("eth0", queues)
            assert txq == _plain_unsteered(queues)
            if txq is not None:
                txq.append(None)
