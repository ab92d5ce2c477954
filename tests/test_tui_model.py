"""What the screen shows, without a terminal: formatting, rows, the mailbox, the live source."""

from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.model.rates import compute_rates
from nettop.output.snapshot_json import build_document
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.timeline import Event, Timeline
from nettop.tui import format as fmt
from nettop.tui import model
from nettop.tui.scripted import ROOT_PROBLEMS, synthetic
from nettop.collectors.cpus import parse_cpu_list, read_cpu_nodes
from nettop.tui.source import Mailbox


def test_si_and_percent_formatting():
    assert fmt.si(None) == "-" and fmt.si(999) == "999" and fmt.si(1234) == "1.2k"
    assert fmt.si(9.4e9, "bit/s") == "9.4Gbit/s" and fmt.pct(12.345) == "12.3"


def test_cpu_list_uses_the_kernels_range_notation():
    assert fmt.cpu_list([5, 0, 1, 2]) == "0-2,5" and fmt.cpu_list([]) == "-" and fmt.cpu_list(None) == "-"


def test_mask_drops_commas_and_leading_zeros():
    assert fmt.mask("00000000,000000f0") == "f0" and fmt.mask("0") == "0" and fmt.mask(None) == "-"


def test_sparkline_scales_to_its_own_peak_and_blanks_unknowns():
    assert fmt.sparkline([0, 50, 100], 3) == "▁▅█"
    assert fmt.sparkline([None, 0.0], 4) == "   ▁"


def test_cpu_nodes_from_a_captured_tree(tmp_path):
    for node, cpus in (("node0", "0-1"), ("node1", "2-3")):
        d = tmp_path / "sys/devices/system/node" / node
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    (tmp_path / "sys/devices/system/node/possible").write_text("0-1\n")
    assert read_cpu_nodes(SysRoot(str(tmp_path))) == {0: 0, 1: 0, 2: 1, 3: 1}
    bad = tmp_path / "sys/devices/system/node/node2"
    bad.mkdir()
    (bad / "cpulist").write_text("4-x\n")  # unparsable: that node is unknown, the rest stand
    assert read_cpu_nodes(SysRoot(str(tmp_path))) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert read_cpu_nodes(SysRoot(str(tmp_path / "nothing"))) == {}


@pytest.mark.live
def test_cpu_nodes_of_the_live_host_cover_its_cpus():
    nodes = read_cpu_nodes(LIVE)
    with open("/sys/devices/system/cpu/online") as f:
        online = parse_cpu_list(f.read())
    assert set(online) <= set(nodes)


def test_queue_rows_agree_with_the_snapshot_json_document():
    a, b = synthetic(3), synthetic(4)
    t = Timeline()
    t.append(a)
    point = t.append(b)
    doc = build_document(a, b, compute_rates(a, b))
    rows = {r.key: r for r in model.queue_rows(point, ["eth0", "veth0"])}
    for name in ("eth0", "veth0"):
        for q in doc["interfaces"][name]["queues"]:
            r = rows[f"{name}/{q['kind']}/{q['index']}"]
            assert r.irq_per_s == q["irq_per_s"] and list(r.irqs) == q["irqs"]
            assert r.rx_pps == q.get("rx_packets_per_s") and r.tx_pps == q.get("tx_packets_per_s")
            assert r.rps == q.get("rps_cpus") and r.xps == q.get("xps_cpus")
            assert r.affinity == (tuple(q["affinity"]) if q["affinity"] is not None else None)
            assert r.effective == (tuple(q["effective_affinity"]) if q["effective_affinity"] is not None else None)
            assert r.settings_age == (q["settings_age_s"] or 0.0)
    assert len(rows) == sum(len(doc["interfaces"][n]["queues"]) for n in ("eth0", "veth0"))


def test_a_kernel_managed_irq_marks_its_queue_with_a_star():
    import dataclasses

    from nettop.tui.tables import QueueTable

    def managed_40(snap):
        aff = dict(snap.irq_affinity)
        aff[40] = dataclasses.replace(aff[40], managed=True)
        return dataclasses.replace(snap, irq_affinity=aff)

    a, b = managed_40(synthetic(3)), managed_40(synthetic(4))
    t = Timeline()
    t.append(a)
    rows = {r.key: r for r in model.queue_rows(t.append(b), ["eth0"])}
    doc = build_document(a, b, compute_rates(a, b))
    by_irq = {tuple(q["irqs"]): q["irqs_managed"] for q in doc["interfaces"]["eth0"]["queues"]}
    for r in rows.values():
        assert r.managed is (40 in r.irqs) and (by_irq[r.irqs] is True) is r.managed
        assert QueueTable.cells(r, "")[1][0].endswith("*") is r.managed


def test_loopback_is_hidden_unless_picked():
    snap = synthetic(0)
    assert model.shown_interfaces(snap, None) == ["eth0", "veth0"]
    assert model.shown_interfaces(snap, frozenset({"lo", "gone0"})) == ["lo"]


def test_first_point_has_cpu_rows_without_rates():
    point = Timeline().append(synthetic(0))
    assert [r.cpu for r in model.cpu_rows(point)] == [0, 1, 2, 3]
    assert model.queue_rows(point, ["eth0"]) == []


def test_root_notice_names_the_denied_sources_or_says_read_only():
    assert model.root_notice(synthetic(0), is_root=True) is None
    text = model.root_notice(synthetic(0, problems=ROOT_PROBLEMS), is_root=False)
    assert text is not None and text.startswith("not root") and "ethtool eth0" in text
    assert "read-only" in (model.root_notice(synthetic(0), is_root=False) or "")


def test_events_map_to_seconds_before_the_newest_point():
    newest = synthetic(10)
    events = [Event(newest.t_wall - 500, "old", "outside"), Event(newest.t_wall - 4, "tuning", "x"),
              Event(newest.t_wall, "mark", "y")]
    assert model.event_offsets(events, newest, 180) == [-4.0, 0.0]


def test_throughput_series_in_bits_per_second():
    t = Timeline()
    for i in range(3):
        t.append(synthetic(i))
    (s,) = model.throughput(t.points(), ["eth0"], 180)
    rates = [p.rates.links["eth0"].rx_bytes_per_s * 8 for p in t.points() if p.rates]
    assert s.xs == (-1.0, 0.0) and list(s.rx_bits) == rates


def test_chart_plots_the_busiest_interfaces_in_name_order():
    t = Timeline()
    t.append(synthetic(0))
    point = t.append(synthetic(1))
    names = ["eth0", "lo", "veth0"]
    assert model.busiest(point.rates, names, 3) == names
    assert model.busiest(point.rates, names, 2) == ["eth0", "veth0"]  # lo moves the least
    assert model.busiest(None, names, 1) == ["eth0"]
    assert model.busiest(point.rates, names, 3, by_load=True) == ["veth0", "eth0", "lo"]


def test_mailbox_keeps_only_the_newest_and_wakes_once():
    box = Mailbox()
    t = Timeline()
    points = [t.append(synthetic(i)) for i in range(3)]
    assert box.put(points[0]) is True
    assert box.put(points[1]) is False and box.put(points[2]) is False
    assert box.take() is points[2] and box.take() is None and box.superseded == 2
    assert box.put(points[0]) is True  # taken: the next point wakes the UI again


def test_mailbox_under_a_producer_thread_never_loses_the_last_point():
    box = Mailbox()
    t = Timeline()
    points = [t.append(synthetic(i)) for i in range(200)]
    wakes = []

    def produce() -> None:
        for p in points:
            if box.put(p):
                wakes.append(p)

    th = threading.Thread(target=produce)
    th.start()
    seen = []
    while th.is_alive() or seen[-1:] != [points[-1]]:
        p = box.take()
        if p is not None:
            seen.append(p)
    th.join()
    assert seen[-1] is points[-1]
    assert [p.snapshot.t_mono for p in seen] == sorted(p.snapshot.t_mono for p in seen)
    assert len(wakes) <= len(seen) + 1


@pytest.mark.live
def test_live_source_samples_off_the_ui_thread_and_keeps_the_newest():
    pytest.importorskip("nettop.collectors.host", reason="collectors not importable", exc_type=ImportError)
    from nettop.tui.source import LiveSource

    src = LiveSource(LIVE, None, interval=0.1)
    woken = threading.Event()
    threads = []

    def wake() -> None:
        threads.append(threading.current_thread().name)
        woken.set()

    src.start(wake)
    try:
        assert woken.wait(10)
        time.sleep(0.5)  # a "slow frame": the sampler keeps going meanwhile
        point = src.take()
        assert point is not None and point is src.timeline.latest()
        assert len(src.timeline.points()) >= 3
        assert set(threads) == {"nettop-sampler"} and len(threads) == 1
        assert src._mailbox.superseded >= 1
        src.paused = True
        assert src.paused and src._sampler.paused
        src.interval = 2.0
        assert src._sampler.interval == 2.0
    finally:
        src.stop()
    assert src.own_cpu_percent() is None  # the first call starts the interval
    t0 = time.process_time()
    while time.process_time() - t0 < 0.05:  # this thread busy for 50 ms of CPU
        pass
    pct = src.own_cpu_percent()
    assert pct is not None and 0.0 < pct <= 100.0 * (os.cpu_count() or 1) + 1.0


def test_latency_rows_and_series_come_from_the_snapshots_latency_stats():
    t = Timeline()
    for i in range(8):
        t.append(synthetic(i, ping=("198.18.0.2",)))
    (row,) = model.latency_rows(t.latest().snapshot)
    stats = t.latest().snapshot.latency["198.18.0.2"]
    assert (row.avg_ms, row.p99_ms, row.loss_pct) == (stats.rtt_avg_ms, stats.rtt_p99_ms, stats.loss_pct)
    xs, ys = model.latency_series(t.points(), 180)["198.18.0.2"]
    assert xs[-1] == 0.0 and ys == [p.snapshot.latency["198.18.0.2"].rtt_avg_ms for p in t.points()]
    assert model.latency_series(Timeline().points(), 180) == {}


def test_settings_not_from_this_sample_say_how_old_they_are_on_screen_and_in_json():
    import dataclasses

    from nettop.tui.tables import BqlTable, QueueTable

    def aged(snap, seconds):
        """eth0's rx-1 RPS and IRQ 40's affinity read `seconds` before the sample."""
        then = snap.t_mono - seconds
        dev = snap.devices["eth0"]
        queues = tuple(dataclasses.replace(q, read_at=then) if (q.kind, q.index) == ("rx", 1) else q
                       for q in dev.queues)
        bql = tuple(dataclasses.replace(b, read_at=then) for b in dev.bql)
        aff = dict(snap.irq_affinity)
        aff[40] = dataclasses.replace(aff[40], read_at=then)
        return dataclasses.replace(snap, devices={**snap.devices, "eth0": dataclasses.replace(dev, queues=queues, bql=bql)},
                                   irq_affinity=aff)

    a, b = synthetic(3), aged(synthetic(4), 7.0)
    t = Timeline()
    t.append(a)
    rows = model.queue_rows(t.append(b), ["eth0", "veth0"])
    doc = build_document(a, b, compute_rates(a, b))
    ages = {(n, q["kind"], q["index"]): q["settings_age_s"] for n in ("eth0", "veth0")
            for q in doc["interfaces"][n]["queues"]}
    stale = {(r.ifname, r.kind, r.index) for r in rows if r.settings_age}
    assert stale and stale == {k for k, v in ages.items() if v == 7.0}
    assert all(v in (0.0, 7.0) for v in ages.values())
    for r in rows:
        label, style = QueueTable.cells(r, "")[0]
        assert (label, style) == ((f"{r.label} ~7s", "muted") if r.settings_age else (r.label, ""))
    bql = model.bql_rows(b, ["eth0"])
    assert bql and all(BqlTable.cells(r)[0][0].endswith(" ~7s") for r in bql)
    assert model.stale_mark(0.0) == "" and model.stale_mark(0.25) == " ~0.2s"


def test_queue_refs_sort_and_label_as_the_rows_they_stand_for():
    """The table sorts and sizes its queue column from unjoined refs: each mode's order,
    and each label with its settings' age, are the full rows' own."""
    import dataclasses

    from nettop.tui.tables import QueueTable

    a, b = synthetic(3, queues=8), synthetic(4, queues=8)
    dev = b.devices["eth0"]
    old = b.t_mono - 12.0
    aff = dict(b.irq_affinity)
    aff[41] = dataclasses.replace(aff[41], effective=(3,))  # asked for one CPU, served on another
    b = dataclasses.replace(b, devices={**b.devices, "eth0": dataclasses.replace(
        dev, queues=tuple(dataclasses.replace(q, read_at=old) if q.index % 3 == 0 else q for q in dev.queues))},
        irq_affinity=aff)
    t = Timeline()
    t.append(a)
    point = t.append(b)
    rows = model.queue_rows(point, ["eth0", "veth0"])
    assert any(r.settings_age for r in rows) and not all(r.settings_age for r in rows)
    for mode in QueueTable.SORTS:
        for reverse in (False, True):
            refs = model.queue_refs(point, ["eth0", "veth0"])
            refs.sort(key=lambda r: QueueTable.sort_key(mode, r), reverse=reverse)
            want = sorted(rows, key=lambda r: QueueTable.sort_key(mode, r), reverse=reverse)
            assert [r.key for r in refs] == [r.key for r in want], mode
            assert [r.shown_label for r in refs] == [r.shown_label for r in want]
    refs = model.queue_refs(point, ["eth0", "veth0"])
    figures = [(r.irq_per_s, r.rx_pps, r.tx_pps, r.effective) for r in refs]  # before any is joined
    assert figures == [(r.irq_per_s, r.rx_pps, r.tx_pps, r.effective) for r in rows]
    assert any(r.effective for r in rows)
    assert [r.row() for r in refs] == rows
    trends = model.QueueTrends(t.points(), 6)
    for r in rows:
        if r.irqs:
            want_t = [sum(p.rates.irqs[i].per_s for i in r.irqs) for p in t.points() if p.rates is not None]
        else:
            want_t = [sum(q.packets_per_s for q in p.rates.links[r.ifname].queues if q.index == r.index
                          and (q.kind == r.kind or r.kind == "combined")) for p in t.points() if p.rates is not None]
        assert trends.of(r) == want_t, r.key


def test_a_queues_settings_age_is_its_oldest_settings():
    """rx-1: IRQ 41's affinity read 7 s ago, its RPS 3 s ago -> 7; tx-0: XPS read 2 s ago,
    BQL 5 s ago -> 5; the rest this tick -> 0 (no mark)."""
    import dataclasses

    b = synthetic(4)
    dev = b.devices["eth0"]
    ago = {("rx", 1): 3.0, ("tx", 0): 2.0}
    queues = tuple(dataclasses.replace(q, read_at=b.t_mono - ago[(q.kind, q.index)]) if (q.kind, q.index) in ago
                   else q for q in dev.queues)
    bql = tuple(dataclasses.replace(x, read_at=b.t_mono - 5.0) if x.queue == 0 else x for x in dev.bql)
    aff = dict(b.irq_affinity)
    aff[41] = dataclasses.replace(aff[41], read_at=b.t_mono - 7.0)
    b = dataclasses.replace(b, devices={**b.devices, "eth0": dataclasses.replace(dev, queues=queues, bql=bql)},
                            irq_affinity=aff)
    t = Timeline()
    t.append(synthetic(3))
    ages = {r.key: r.settings_age for r in model.queue_rows(t.append(b), ["eth0"])}
    assert ages.pop("eth0/rx/1") == 7.0 and ages.pop("eth0/tx/0") == 5.0
    assert set(ages.values()) == {0.0}


def _renamed(snap, old: str, new: str):
    """`snap` with interface `old` called `new` (a long name: labels up to the column's cap)."""
    import dataclasses

    def keyed(d, fix=lambda v: v):
        return {(new if k == old else k): (fix(v) if k == old else v) for k, v in d.items()}

    return dataclasses.replace(
        snap, links=keyed(snap.links, lambda v: dataclasses.replace(v, name=new)),
        devices=keyed(snap.devices, lambda v: dataclasses.replace(v, ifname=new)),
        queue_maps=keyed(snap.queue_maps, lambda v: dataclasses.replace(v, ifname=new)),
        queue_stats=keyed(snap.queue_stats, lambda v: dataclasses.replace(v, ifname=new)),
        qdiscs=keyed(snap.qdiscs))


_AGES = [None, 0.0, 0.04, 0.2, 0.9996, 1.0, 9.4, 9.5, 9.6, 99.4, 99.5, 99.6, 1000.5, 12345.0]


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 12), st.sampled_from(["veth1", "vethlongername0", "avery-long-interface.9"]), st.data())
def test_label_columns_widen_as_every_rows_label_would_have_them(queues, name, data):
    """The queue and BQL tables' label columns grow to the widest label of all their rows
    (marks of the settings' ages included, at most 24): measured on the rows that can
    be wider than the column now (`queue_label_width`, `bql_label_width`), they grow as
    measuring every row's label does, whatever the ages, the names and the column's
    width now."""
    import dataclasses

    from nettop.tui.tables import label_width

    a, b = (_renamed(synthetic(i, queues=queues, veths=2), "veth1", name) for i in (3, 4))
    now = b.t_mono

    def at(_: object) -> float | None:
        age = data.draw(st.sampled_from(_AGES))
        return None if age is None else now - age

    devices = {n: dataclasses.replace(d, queues=tuple(dataclasses.replace(q, read_at=at(q)) for q in d.queues),
                                      bql=tuple(dataclasses.replace(x, read_at=at(x)) for x in d.bql))
               for n, d in b.devices.items()}
    aff = {i: dataclasses.replace(x, read_at=at(x)) for i, x in b.irq_affinity.items()}
    b = dataclasses.replace(b, devices=devices, irq_affinity=aff)
    t = Timeline()
    t.append(a)
    point = t.append(b)
    names = model.shown_interfaces(b, None)
    refs = model.queue_refs(point, names)
    brows = model.bql_rows(b, names)
    assert refs and {r.ifname for r in refs} >= {name, "eth0"}
    every_q = label_width((r.shown_label for r in refs), 10)
    every_b = label_width((f"{r.ifname} tx-{r.queue}{model.stale_mark(r.age)}" for r in brows), 14)
    for width in (10, 14, 15, 17, 18, 19, 20, 24, every_q - 1, every_q, every_b - 1):
        assert max(width, model.queue_label_width(refs, 10, width)) == max(width, every_q), width
        assert max(width, model.bql_label_width(brows, 14, width)) == max(width, every_b), width


@pytest.mark.parametrize("old", ["queue", "bql", "affinity"])
def test_one_old_setting_of_any_kind_widens_the_queue_column(old):
    """Every setting fresh but one, 1,000 s old (a queue config, a BQL state or an IRQ's
    affinity): its queue's label carries " ~1000s" and the column grows to it."""
    import dataclasses

    from nettop.tui.tables import label_width

    a, b = synthetic(3, queues=4), synthetic(4, queues=4)
    now = b.t_mono
    dev = b.devices["eth0"]
    fresh = {"queues": tuple(dataclasses.replace(q, read_at=now) for q in dev.queues),
             "bql": tuple(dataclasses.replace(x, read_at=now) for x in dev.bql)}
    aff = {i: dataclasses.replace(x, read_at=now) for i, x in b.irq_affinity.items()}
    if old == "queue":
        fresh["queues"] = (dataclasses.replace(fresh["queues"][0], read_at=now - 1000.0), *fresh["queues"][1:])
    elif old == "bql":
        fresh["bql"] = (dataclasses.replace(fresh["bql"][0], read_at=now - 1000.0), *fresh["bql"][1:])
    else:
        aff[min(aff)] = dataclasses.replace(aff[min(aff)], read_at=now - 1000.0)
    b = dataclasses.replace(b, devices={**b.devices, "eth0": dataclasses.replace(dev, **fresh)}, irq_affinity=aff)
    t = Timeline()
    t.append(a)
    refs = model.queue_refs(t.append(b), ["eth0"])
    every = label_width((r.shown_label for r in refs), 10)
    assert every == len("eth0 rx-0 ~1000s") and model.queue_label_width(refs, 10, 10) == every
