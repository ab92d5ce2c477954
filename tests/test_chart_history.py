"""The compact chart history: the charts' figures as whole points gave them, in bounded memory."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from nettop.model.history import ChartHistory
from nettop.model.timeline import Timeline
from nettop.output.before_after import figures
from nettop.tui import model
from nettop.tui.scripted import synthetic


def _host(i: int):  # type: ignore[no-untyped-def]
    """Tick i of a host whose veths come and go and whose ping target changes, with a
    gap in time (a paused sampler) in the middle."""
    snap = synthetic(i, veths=1 + (i // 7) % 3, ping=("198.18.0.2",) if i % 11 < 8 else ("198.18.0.2", "::1"))
    return dataclasses.replace(snap, t_mono=snap.t_mono + (30.0 if i >= 40 else 0.0))


def test_charts_from_the_history_equal_the_charts_from_whole_points():
    whole = Timeline()
    for i in range(90):
        whole.append(_host(i))
        names = ["eth0", "veth0", "veth1", "veth2", "gone0", "lo"]
        for window in (5.0, 60.0, 180.0):
            assert model.throughput_of(whole, names, window) == model.throughput(whole.points(), names, window)
            assert model.latency_series_of(whole, window) == model.latency_series(whole.points(), window)


def test_a_short_history_keeps_the_newest_points_as_a_deque_of_whole_points_would():
    short, whole = Timeline(max_points=20), Timeline(max_points=20)
    for i in range(200):
        short.append(_host(i))
        whole.append(_host(i))
        assert model.throughput_of(short, ["eth0", "veth1"], 1e9) == model.throughput(whole.points(), ["eth0", "veth1"], 1e9)
        assert model.latency_series_of(short, 1e9) == model.latency_series(whole.points(), 1e9)


def test_memory_stops_growing_at_the_cap_and_vanished_series_are_dropped():
    h = ChartHistory(max_points=100)
    sizes = []
    for i in range(5000):
        snap = synthetic(i, veths=3 if i < 1000 else 1)  # veth1 and veth2 vanish at tick 1000
        h.append(snap, None if i == 0 else _rates(i))
        if i % 500 == 499:
            sizes.append(h.nbytes())
    assert len(h) == 100
    assert max(sizes[3:]) <= min(sizes[3:]) * 1.3  # flat once the vanished series are gone
    assert max(sizes) < 100 * 8 * 2 * 8 * 3  # times + a few links × 2 arrays, with the trim slack
    xs, rx, _ = h.link_series("eth0", 1e9)
    assert len(xs) == 100 and xs[0] == -99.0
    assert h.link_series("veth2", 1e9) == ([], [], [])  # dropped, not kept as NaN forever



def _rates(i: int):  # type: ignore[no-untyped-def]
    t = Timeline(max_points=2)
    t.append(synthetic(i - 1, veths=3 if i - 1 < 1000 else 1))
    return t.append(synthetic(i, veths=3 if i < 1000 else 1)).rates


def test_a_spike_stays_in_the_history_with_its_full_value():
    t = Timeline(max_points=50, whole_points=4)
    for i in range(60):
        t.append(synthetic(i))
    peak = max(p.rates.links["eth0"].rx_bytes_per_s for p in t.points() if p.rates)
    (s,) = model.throughput_of(t, ["eth0"], 1e9)
    assert len(s.xs) == 50 and 8 * peak in s.rx_bits


def test_a_live_timeline_keeps_few_whole_points_and_one_digest_per_interval():
    t = Timeline(max_points=300, whole_points=16, digest=figures)
    for i in range(400):
        t.append(synthetic(i))
    assert len(t.points()) == 16 and len(t.digests()) == 300
    assert t.digests()[-1] == figures(t.latest().snapshot, t.latest().rates)
    assert len(Timeline(max_points=300).points()) == 0 and Timeline().digests() == []


def test_interfaces_that_come_and_go_cost_their_own_lifetime_not_the_window():
    """A churning host (containers, labs): a new interface every tick, each up for 3 ticks.
    Each series holds its 3 values, so the history is the size of what it saw, not of
    every name in the window times the window (16 MB here), and a sample's cost does not
    grow with the names seen before it."""
    from types import SimpleNamespace

    h = ChartHistory(max_points=1000)
    for i in range(1000):
        links = {f"c{j}": SimpleNamespace(rx_bytes_per_s=float(j), tx_bytes_per_s=1.0) for j in range(max(0, i - 2), i + 1)}
        h.append(SimpleNamespace(t_mono=float(i), latency={}), SimpleNamespace(links=links))  # type: ignore[arg-type]
    assert h.nbytes() <= 1000 * 8 + 1000 * 3 * 16
    assert h.link_series("c500", 1e9) == ([-499.0, -498.0, -497.0], [4000.0] * 3, [8.0] * 3)
    assert h.link_series("c999", 1e9)[0] == [0.0]


def _figs():  # type: ignore[no-untyped-def]
    from hypothesis import strategies as st

    from nettop.output.before_after import Figures

    num = st.floats(allow_nan=False) | st.integers(min_value=-2**40, max_value=2**40).map(float)
    opt = st.none() | num
    return st.builds(Figures, t_wall=num, elapsed_s=num, rx_bytes_s=num, tx_bytes_s=num,
                     busiest_link=st.sampled_from(["", "eth0", "eth1", "veth9", "ens1f0np0"]) | st.text(max_size=6),
                     max_softirq_pct=num, softirq_cpu=st.none() | st.integers(0, 8191), drops_s=num,
                     squeeze_s=num, worst_rtt_ms=opt, worst_loss_pct=opt, irq_s=num, t_mono=num)


def test_the_figures_ring_gives_back_what_a_deque_of_figures_kept():
    from hypothesis import given, settings, strategies as st

    from nettop.output.before_after import FiguresRing

    @settings(max_examples=150, deadline=None)
    @given(st.integers(1, 9), st.lists(_figs(), max_size=40))
    def check(size, items):  # type: ignore[no-untyped-def]
        import collections

        ring, want = FiguresRing(size), collections.deque(maxlen=size)
        for f in items:
            ring.append(f)
            want.append(f)
            assert list(ring) == list(want) and len(ring) == len(want)
        # bit for bit: -0.0 stays -0.0, a None stays None and 0.0 stays 0.0
        for got, f in zip(ring, want):
            assert [repr(getattr(got, k)) for k in f.__slots__] == [repr(getattr(f, k)) for k in f.__slots__]

    check()


def test_the_figures_ring_is_its_full_size_from_the_first_sample_and_forgets_old_names():
    from nettop.output.before_after import FiguresRing

    ring = FiguresRing(100)
    empty = ring.nbytes()
    base = figures(synthetic(2), _rates(2))
    for i in range(2000):  # a churning host: the busiest interface is a new container's each tick
        ring.append(dataclasses.replace(base, t_mono=float(i), busiest_link=f"c{i}"))
        assert ring.nbytes() == empty
    assert len(ring._names) <= 4 * 100
    assert [(f.t_mono, f.busiest_link) for f in ring] == [(float(i), f"c{i}") for i in range(1900, 2000)]


def test_the_live_timelines_digests_are_columns_equal_to_the_figures():
    from nettop.output.before_after import FiguresRing

    t = Timeline(max_points=300, whole_points=16, digest=figures, digest_store=FiguresRing)
    plain = Timeline(max_points=300, whole_points=16, digest=figures)
    for i in range(400):
        t.append(synthetic(i))
        plain.append(synthetic(i))
    assert isinstance(t._digests, FiguresRing)
    assert t.digests() == plain.digests() and len(t.digests()) == 300
    assert t.digests()[-1] == figures(t.latest().snapshot, t.latest().rates)


def test_a_live_timelines_events_expire_with_its_oldest_sample_and_a_whole_ones_do_not():
    from nettop.model.timeline import Event

    live = Timeline(max_points=50, whole_points=16, digest=figures)
    whole = Timeline(max_points=50)
    for i in range(200):
        for t in (live, whole):
            snap = synthetic(i)
            t.add_event(Event(snap.t_wall, "tuning", f"change {i}"))
            t.append(snap)
    assert live.event_serial == whole.event_serial == 200
    kept = [e.text for e in live.events()]
    oldest = live.history.oldest_t_mono()
    span = synthetic(199).t_mono - oldest
    assert kept[-1] == "change 199" and len(kept) <= 50 + 5 / (synthetic(1).t_mono - synthetic(0).t_mono) + 1
    assert all(e.t_wall >= synthetic(199).t_wall - span - 5.0 for e in live.events())
    assert len(whole.events()) == 200  # the recorder's and serve's timelines keep theirs


def test_the_window_is_the_same_whether_times_only_grow_or_stepped_back():
    """The window's first sample is found by bisection while the kept times only grow; a
    replay across a reboot (times fall) is scanned whole, as before."""
    import random

    rnd = random.Random(7)
    for stepped in (False, True):
        h = ChartHistory(max_points=500)
        t = 1000.0
        times = []
        for i in range(1200):
            t += rnd.choice((0.1, 0.3, 1.0, 1.0, 7.3))
            if stepped and i == 900:
                t = 5.0  # the recording's next boot
            times.append(t)
            h.append(SimpleNamespace(t_mono=t, latency={}), None)  # type: ignore[arg-type]
            if i % 37 == 0 or i > 1150:
                kept = times[-500:]
                for w in (0.1, 0.3, 1.0, 60.0, 600.0, 1e9):
                    now, idx = h._span(w)
                    assert [h._t_mono[j] for j in idx] == [x for x in kept if now - x <= w]


def _links(names: dict[str, float]):  # type: ignore[no-untyped-def]
    return SimpleNamespace(links={n: SimpleNamespace(rx_bytes_per_s=v, tx_bytes_per_s=v + 1) for n, v in names.items()})


def test_a_name_that_comes_back_costs_its_figures_not_the_time_it_was_away():
    """A VM's vnet3 or a lab's veth0 made again minutes later: 200 names, each up for 3
    samples in every 200. Filling each absence with NaN made every name cost the whole
    window (200 x 1,000 x 16 bytes, 3.2 MB here; 18 MB a minute of 2,000-pair churn at
    -i 0.1); in runs each costs its 15 figures."""
    h = ChartHistory(max_points=1000)
    for i in range(1000):
        h.append(SimpleNamespace(t_mono=float(i), latency={}),  # type: ignore[arg-type]
                 _links({f"v{j}": float(i) for j in range(200) if (i - j) % 200 < 3}))
    assert h.nbytes() == 1000 * 8 + 200 * 5 * 3 * 16
    xs, rx, tx = h.link_series("v7", 1e9)
    starts = [7 + 200 * k for k in range(5)]
    assert xs == [float(s + d - 999) for s in starts for d in range(3)]
    assert rx == [8.0 * (s + d) for s in starts for d in range(3)]
    assert tx == [8.0 * (s + d + 1) for s in starts for d in range(3)]


def test_runs_give_back_what_a_dense_series_would_whatever_the_gaps_and_the_trims():
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=200, deadline=None)
    @given(st.integers(1, 40), st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=250))
    def check(max_points, steps):  # type: ignore[no-untyped-def]
        h = ChartHistory(max_points=max_points)
        had: dict[int, float] = {}
        for i, (there, v) in enumerate(steps):
            h.append(SimpleNamespace(t_mono=float(i), latency={}),  # type: ignore[arg-type]
                     _links({"eth0": 0.0, **({"veth0": float(v * 1000 + i)} if there else {})}))
            if there:
                had[i] = float(v * 1000 + i)
            kept = range(max(0, i + 1 - max_points), i + 1)
            want = [k for k in kept if k in had]
            assert h.link_series("veth0", 1e9) == (
                [float(k - i) for k in want], [8 * had[k] for k in want], [8 * (had[k] + 1) for k in want])
        if steps and not any(t for t, _ in steps[-(max_points + max(16, max_points // 4)):]):
            assert "veth0" not in h._links or h._links["veth0"].nbytes() == 0

    check()
