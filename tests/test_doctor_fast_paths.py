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
