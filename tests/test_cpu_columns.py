"""The per-CPU rates computed on arrays (model/cpu_columns.py) are those of the per-CPU
path: the same CpuRates, floats equal bit for bit, the same problems in the same order,
on snapshots with counts backwards, wrapped, beyond 32 and 64 bits, missing CPUs and
offline ones."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from nettop.doctor import window as W
from nettop.doctor.window import Window
from nettop.model import rates as R
from nettop.model.counters import U32, U64
from nettop.model.cpu_columns import columns, SOFTNET, TIMES
from nettop.model.snapshot import CpuTimes, InterruptTable, Snapshot, SoftirqCounts, SoftnetRow
from nettop.model.timeline import Point

# a counter's earlier value: plain, near the top of 32 bits, beyond 32, 50 and 53 bits, negative
_BASE = st.one_of(st.integers(0, 1 << 20), st.integers(U32 - 2000, U32 - 1), st.integers(U32, 1 << 40),
                  st.sampled_from([0, 1, (1 << 50) - 3, 1 << 50, (1 << 53) + 1, (1 << 62) + 1, -1]))
# ... and beyond int64 (then the arrays are not used): in a few examples only, so most
# examples compare the arrays with the per-CPU path
_WIDE = st.one_of(_BASE, st.sampled_from([(1 << 63) - 1, 1 << 63, U64 - 1, U64, -(1 << 63) - 1]))


@st.composite
def _pair(draw: st.DrawFn, step: int, base: st.SearchStrategy[int], plain: bool) -> tuple[int, int]:
    """(before, now): a small step forwards on a plain CPU, else sometimes backwards,
    wrapped past 32 bits, or two unrelated values."""
    x = draw(base)
    how = "up" if plain else draw(st.sampled_from(["up"] * 3 + ["same", "back", "wrap", "any"]))
    if how == "up":
        return x, x + draw(st.integers(0, step))
    if how == "same":
        return x, x
    if how == "back":
        return x, x - draw(st.integers(1, 1000))
    if how == "wrap":
        return U32 - draw(st.integers(1, 1000)), draw(st.integers(0, 1000))
    return x, draw(base)


def _build(draw: st.DrawFn, cpus: list[int], make, nfields: int, step: int, base: st.SearchStrategy[int]):
    """Two mappings CPU -> dataclass, each CPU missing from either now and then."""
    a, b = {}, {}
    for cpu in cpus:
        plain = draw(st.integers(0, 2)) > 0
        pairs = [draw(_pair(step, base, plain)) for _ in range(nfields)]
        if draw(st.integers(0, 9)):
            a[cpu] = make(cpu, [p[0] for p in pairs])
        if draw(st.integers(0, 9)):
            b[cpu] = make(cpu, [p[1] for p in pairs])
    return a, b


def _snaps(draw: st.DrawFn, n: int):
    cpus = sorted(draw(st.sets(st.integers(0, 3 * n), min_size=1, max_size=n)))
    base = _WIDE if draw(st.integers(0, 9)) == 0 else _BASE
    ta, tb = _build(draw, cpus, lambda c, v: CpuTimes(c, *v), 8, draw(st.sampled_from([2, 20, 200])), base)
    sa, sb = _build(draw, cpus, lambda c, v: SoftirqCounts(c, *v), 2, 10_000, base)
    backlog = draw(st.sampled_from([None, 0, 7]))
    na, nb = _build(draw, cpus, lambda c, v: SoftnetRow(c, *v, backlog=backlog), 5, 10_000, base)
    online = draw(st.sampled_from(["all", "none", "some"]))
    on = tuple(cpus) if online == "all" else () if online == "none" else tuple(
        c for c in cpus if draw(st.integers(0, 5)))
    prev = Snapshot(t_mono=1.0, t_wall=1.0, host="h", kernel="k", online_cpus=tuple(cpus),
                    interrupts=InterruptTable(()), softirqs=sa, cpu_times=ta, softnet=na)
    cur = Snapshot(t_mono=2.0, t_wall=2.0, host="h", kernel="k", online_cpus=on,
                   interrupts=InterruptTable(()), softirqs=sb, cpu_times=tb, softnet=nb)
    return prev, cur


def _same(got: dict, want: dict) -> None:
    # repr: floats bit for bit (-0.0 is not 0.0), Python floats (not numpy's), same order
    assert repr(list(got.items())) == repr(list(want.items()))


@settings(max_examples=400, deadline=None)
@given(st.data(), st.integers(1, 12), st.sampled_from([1.0, 0.1, 0.7, 3.3333333, 1, 0.30000000000000004, 1e-9]))
def test_the_arrays_give_what_the_per_cpu_path_gives(data, n, elapsed):
    prev, cur = _snaps(data.draw, n)
    cpus = sorted(set(cur.online_cpus) | set(cur.cpu_times) | set(prev.cpu_times))
    want_p: list = []
    want = R._cpu_rates_each(prev, cur, elapsed, want_p, cpus)
    got_p: list = []
    got = R._cpu_rates_arrays(prev, cur, elapsed, got_p, cpus)
    if got is not None:  # its columns, read before anything makes its CpuRates, are the dict's
        names = data.draw(st.lists(st.sampled_from(R._CPU_FIELDS), max_size=4))
        keys, cols = got.columns(*names)
        assert got._built is None
        assert repr((keys, cols)) == repr((list(want), [[getattr(v, f) for v in want.values()] for f in names]))
    if got is None:  # a value beyond int64: the per-CPU path for all (said by columns())
        assert any(columns(m, f) is None for m, f in ((prev.cpu_times, TIMES), (cur.cpu_times, TIMES),
                                                       (prev.softnet, SOFTNET), (cur.softnet, SOFTNET),
                                                       (prev.softirqs, ("net_rx", "net_tx")),
                                                       (cur.softirqs, ("net_rx", "net_tx"))))
        return
    _same(got, want)
    assert got_p == want_p


def _big(n: int, t: float, k: int, **change) -> Snapshot:
    cpus = tuple(range(n))
    times = {c: CpuTimes(c, 40 * k + c, 3, 20 * k, 1000 + 30 * k, 1, 2 * k, 5 * k + c % 3, 0) for c in cpus}
    soft = {c: SoftirqCounts(c, 1000 * k + c, 10 * k) for c in cpus}
    net = {c: SoftnetRow(c, 500 * k, c % 2 * k, k, 0, 0, backlog=c % 4) for c in cpus}
    for cpu, row in change.get("times", {}).items():
        times[cpu] = row
    return Snapshot(t_mono=t, t_wall=t, host="h", kernel="k", online_cpus=change.get("online", cpus),
                    interrupts=InterruptTable(()), softirqs=soft, cpu_times=times, softnet=net)


def test_a_big_host_judges_only_the_cpus_with_a_problem_one_by_one(monkeypatch):
    """At 1,024 CPUs only the CPU that counted more ticks than the clock allows and the
    offline one walk the per-CPU path, and the figures and problem are those of that path."""
    prev = _big(1024, 10.0, 1)
    cur = _big(1024, 11.0, 2, times={7: CpuTimes(7, 20_047, 3, 40, 1060, 1, 4, 11, 0)},
               online=tuple(c for c in range(1024) if c != 9))
    walked: list[int] = []
    one = R._one_cpu

    def counting(prev, cur, cpu, elapsed, problems):
        walked.append(cpu)
        return one(prev, cur, cpu, elapsed, problems)

    monkeypatch.setattr(R, "_one_cpu", counting)
    problems: list = []
    got = R.cpu_rates(prev, cur, 1.0, problems)
    assert walked == [7, 9]
    assert got[9].presence is R.Presence.OFFLINE and got[7].user_pct == 100.0 * 20_000 / 20_057
    assert got[5].user_pct == 100.0 * 40 / 97 and got[5].net_rx_per_s == 1000.0
    assert got[3].backlog == 3 and got[4].softnet_dropped_per_s == 0.0
    assert len(problems) == 1 and "cpu7 counted 20057 ticks in 1.00 s" in problems[0].message
    monkeypatch.setattr(R, "_one_cpu", one)
    want_p: list = []
    _same(got, R._cpu_rates_each(prev, cur, 1.0, want_p, list(range(1024))))
    assert want_p == problems


def test_a_count_that_is_no_int_takes_the_per_cpu_path():
    """A damaged recording's float is not truncated into an int64 column."""
    prev = _big(300, 10.0, 1)
    cur = _big(300, 11.0, 2, times={4: CpuTimes(4, 80.5, 3, 40, 1060, 1, 4, 11, 0)})
    assert columns(cur.cpu_times, TIMES) is None
    assert R._cpu_rates_arrays(prev, cur, 1.0, [], list(range(300))) is None
    got = R.cpu_rates(prev, cur, 1.0)
    assert got[4].user_pct == 100.0 * (80.5 - 44) / (80.5 - 44 + 20 + 30 + 2 + 5)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(1, 12), st.sampled_from([1.0, 0.7, 3.3333333, 5, 1e-9]))
def test_the_doctors_window_on_arrays_gives_what_it_gives_per_cpu(data, n, elapsed):
    """Window.cpu_pct, softnet and net_rx: the arrays (from ARRAYS_FROM CPUs) and the per-CPU
    walk give the same figures, bit for bit, in the same order."""
    prev, cur = _snaps(data.draw, n)
    for before, after, what in ((prev.cpu_times, cur.cpu_times, "pct"), (prev.softnet, cur.softnet, SOFTNET),
                                (prev.softirqs, cur.softirqs, ("net_rx", "net_tx"))):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(W, "ARRAYS_FROM", 1 << 30)
            want = W._cpu_pct(before, after) if what == "pct" else W._per_s(before, after, what, len(what) - 1, elapsed)
            mp.setattr(W, "ARRAYS_FROM", 1)
            got = W._cpu_pct(before, after) if what == "pct" else W._per_s(before, after, what, len(what) - 1, elapsed)
        assert repr(list(got.items())) == repr(list(want.items()))


def test_the_window_of_a_big_host_is_that_of_its_cpus_one_by_one():
    """At 1,024 CPUs (the arrays) the window's CPU figures are those of the per-CPU walk,
    a CPU beyond 50 bits and one missing from the older sample included."""
    prev = _big(1024, 10.0, 1)
    cur = _big(1024, 15.0, 2, times={3: CpuTimes(3, (1 << 60) + 5, 3, 40, 1060, 1, 4, 10, 0)})
    del prev.cpu_times[8]  # built for this test only: no snapshot is changed after its read
    w = Window([Point(prev, None), Point(cur, None)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(W, "ARRAYS_FROM", 1 << 30)
        one = Window([Point(prev, None), Point(cur, None)])
        want = (one.cpu_pct(), one.softnet(), one.net_rx())
    got = (w.cpu_pct(), w.softnet(), w.net_rx())
    assert repr(got) == repr(want)
    assert 8 not in got[0] and 3 in got[0] and got[0][5] == (100.0 * 5 / 97, 100.0 * 2 / 97, 100.0 * 30 / 97)
    assert got[1][4] == (500 / 5.0, 0.0, 1 / 5.0, 0.0) and got[2][9] == 1000 / 5.0


def test_a_generated_264_cpu_host_gets_the_same_rates_and_findings_from_the_arrays(tmp_path):
    """GIVEN two reads of a generated 264-CPU host with two CPUs offline, WHEN the rates and
    the doctor run on arrays (from ARRAYS_FROM CPUs) and one CPU at a time, THEN the rates,
    problems and findings are the same."""
    import dataclasses

    from treegen import generate_tree

    from nettop.collectors.host import HostReader
    from nettop.doctor.engine import evaluate_window
    from nettop.kernel.sysroot import SysRoot

    kw = dict(cpus=264, irqs=1024, queues=32, offline=(5, 77))
    t0, t1 = generate_tree(tmp_path / "t0", step=0, **kw), generate_tree(tmp_path / "t1", step=1, **kw)
    with HostReader(SysRoot(str(t0))) as r0, HostReader(SysRoot(str(t1))) as r1:
        a = r0.read()
        b = r1.read()
    b = dataclasses.replace(b, t_mono=a.t_mono + 1.0)

    def run() -> tuple[str, list]:
        rates = R.compute_rates(a, b)
        window = Window([Point(a, None), Point(b, rates)])
        return repr((dict(rates.cpus), rates.problems)), evaluate_window(window)

    arrays = R._cpu_rates_arrays
    took: list[bool] = []

    def counted(*args):
        out = arrays(*args)
        took.append(out is not None)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "_cpu_rates_arrays", counted)
        got = run()
    assert took == [True]  # the rates were those of the arrays
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "ARRAYS_FROM", 1 << 30)
        mp.setattr(W, "ARRAYS_FROM", 1 << 30)
        want = run()
    assert got == want
    assert got[1], "the generated host shows findings to compare"


def test_a_big_hosts_cpu_rates_are_built_when_first_read_and_read_as_the_dict(monkeypatch):
    """GIVEN the rates of 1,024 CPUs (the arrays) WHEN nothing reads them (`nettop record`)
    THEN no CpuRates is built; the first read builds them once, and they read, compare and
    pickle as the dict of the per-CPU path, whose problems were told at once."""
    import pickle

    prev = _big(1024, 10.0, 1)
    cur = _big(1024, 11.0, 2, times={7: CpuTimes(7, 20_047, 3, 40, 1060, 1, 4, 11, 0)})
    built: list[int] = []
    build = R._build_cpu_rates

    def counting(*parts):
        built.append(1)
        return build(*parts)

    monkeypatch.setattr(R, "_build_cpu_rates", counting)
    rates = R.compute_rates(prev, cur)
    assert built == [] and len(rates.problems) == 1  # cpu7 judged, and told, at once
    want_p: list = []
    want = R._cpu_rates_each(prev, cur, 1.0, want_p, list(range(1024)))
    assert rates.problems == tuple(want_p)
    assert rates.cpus[7] == want[7] and built == [1]
    _same(dict(rates.cpus), want)
    assert rates.cpus == want and want == rates.cpus and len(rates.cpus) == 1024 and 1023 in rates.cpus
    assert rates == R.compute_rates(prev, cur) and built == [1, 1]
    copy = pickle.loads(pickle.dumps(rates.cpus))
    assert type(copy) is dict and copy == want
    assert built == [1, 1]


def test_a_big_hosts_cpu_columns_are_read_without_making_its_cpu_rates(monkeypatch):
    """GIVEN the rates of 1,024 CPUs, one of them judged (more ticks than the clock
    allows), one gone (in no file of the later sample) and one left out (online, in no
    file of either) WHEN the live view's digest
    and CPU rows read their columns THEN no CpuRates is made, and the columns are those
    of the dict, in its order; once the dict is made they are read off it."""
    from nettop.model.timeline import Point
    from nettop.output.before_after import figures
    from nettop.tui.model import cpu_rows

    prev = _big(1024, 10.0, 1)
    cur = _big(1024, 11.0, 2, times={7: CpuTimes(7, 20_047, 3, 40, 1060, 1, 4, 11, 0)})
    cur = dataclasses.replace(cur, online_cpus=tuple(c for c in cur.online_cpus if c != 1000) + (2000,),
                              **{t: {c: v for c, v in getattr(cur, t).items() if c != 1000}
                                 for t in ("cpu_times", "softirqs", "softnet")})
    built: list[int] = []
    build = R._build_cpu_rates
    monkeypatch.setattr(R, "_build_cpu_rates", lambda *parts: built.append(1) or build(*parts))
    rates = R.compute_rates(prev, cur)
    names = R._CPU_FIELDS
    keys, cols = rates.cpus.columns(*names)
    digest, rows = figures(cur, rates), cpu_rows(Point(cur, rates))
    assert built == []
    want = dict(rates.cpus)
    assert built == [1] and len(rates.problems) == 1 and "cpu7" in str(rates.problems[0])
    assert want[1000].presence is R.Presence.GONE and 2000 not in want and len(rows) == 1023
    assert repr((keys, cols)) == repr((list(want), [[getattr(v, f) for v in want.values()] for f in names]))
    assert repr(rates.cpus.columns("softirq_pct", "cpu")) == repr(R.rate_columns(want, "softirq_pct", "cpu"))
    assert repr(digest) == repr(figures(cur, rates)) and rows == cpu_rows(Point(cur, rates))
    assert built == [1]


def test_the_cpu_set_kept_from_tick_to_tick_follows_the_online_cpus():
    """cpu_rates keeps the union of CPUs and the offline mask while the tables' CPUs and
    the online list stay the same (rates._cpu_set); a CPU going offline, coming back, or
    a table of other CPUs gives what the per-CPU path gives, tick after tick."""
    import dataclasses

    from nettop.model.counts import numpy
    from nettop.model.cpu_table import CpuTable

    np = numpy()

    def tables(snap: Snapshot) -> Snapshot:
        rows = [[getattr(t, f.name) for f in dataclasses.fields(CpuTimes)] for t in snap.cpu_times.values()]
        return dataclasses.replace(snap, cpu_times=CpuTable(CpuTimes, np.array(rows, dtype=np.int64)))

    everyone = tuple(range(300))
    for online, ncpus in ((everyone, 300), (everyone[:9] + everyone[10:], 300), (everyone, 300),
                          (everyone[:9] + everyone[10:], 300), (tuple(range(310)), 310), (everyone, 300)):
        prev = tables(_big(ncpus, 10.0, 1))
        cur = tables(_big(ncpus, 11.0, 2, online=online))
        got_p: list = []
        got = R.cpu_rates(prev, cur, 1.0, got_p)
        want_p: list = []
        _same(got, R._cpu_rates_each(prev, cur, 1.0, want_p, sorted(set(online) | set(range(ncpus)))))
        assert got_p == want_p
        assert (got[9].presence is R.Presence.OFFLINE) == (9 not in online)
