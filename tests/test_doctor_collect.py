"""The doctor's inputs and outputs around the engine: the host_tuning collector, the
Snapshot field in recordings (old ones still decode), findings as timeline events, the
before/after of a fix, and the report's section."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from doctor_host import FakeHost
from nettop.collectors.host import HostReader
from nettop.collectors.host_tuning import TuningReader, read_governors, read_idle_states
from nettop.doctor.report import section
from nettop.doctor.watch import EVENT_KIND, Watch
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.timeline import Point, Timeline
from nettop.record import codec
from nettop.record.store import Reader

DATA = Path(__file__).parent / "data"


def w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def test_governors_per_policy_and_enabled_cstates_from_a_tree(tmp_path):
    w(tmp_path, "sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "powersave")
    w(tmp_path, "sys/devices/system/cpu/cpufreq/policy0/affected_cpus", "0 1")
    w(tmp_path, "sys/devices/system/cpu/cpufreq/policy2/scaling_governor", "performance")
    w(tmp_path, "sys/devices/system/cpu/cpufreq/policy2/affected_cpus", "2")
    for n, (name, lat, off) in enumerate((("POLL", 0, 0), ("C1", 2, 0), ("C1E", 10, 1), ("C6", 133, 0))):
        d = f"sys/devices/system/cpu/cpu0/cpuidle/state{n}"
        w(tmp_path, f"{d}/name", name)
        w(tmp_path, f"{d}/latency", str(lat))
        w(tmp_path, f"{d}/disable", str(off))
    root = SysRoot(str(tmp_path))
    assert read_governors(root) == {"powersave": 2, "performance": 1}
    assert read_idle_states(root) == (("POLL", 0), ("C1", 2), ("C6", 133))


def test_a_tree_without_cpufreq_cpuidle_or_conntrack_reads_as_absent(tmp_path):
    (tmp_path / "proc").mkdir()
    tuning, problems = TuningReader(SysRoot(str(tmp_path))).read(["eth0"])
    assert problems == [] and tuning.governors == {} and tuning.idle_states == ()
    assert tuning.conntrack_count is None and tuning.nics["eth0"].rx_missed is None


def test_an_unchanged_tick_gives_the_last_tuning_object_and_any_change_a_new_one(tmp_path):
    """A quiet host's HostTuning is the same object tick after tick (no NicTuning per NIC
    and no copy of every CPU's node each tick); a conntrack count, a NIC's ring overflows
    or a governor (at the slow refresh) that moves gives a new one with the new value."""
    w(tmp_path, "proc/sys/net/netfilter/nf_conntrack_count", "10")
    w(tmp_path, "proc/sys/net/netfilter/nf_conntrack_max", "100")
    w(tmp_path, "sys/class/net/eth0/statistics/rx_missed_errors", "1")
    w(tmp_path, "sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "powersave")
    w(tmp_path, "sys/devices/system/node/node0/cpulist", "0-3")
    now = [0.0]
    reader = TuningReader(SysRoot(str(tmp_path)), slow_s=5.0, clock=lambda: now[0])
    first, _ = reader.read(["eth0"])
    now[0] = 1.0
    again, _ = reader.read(["eth0"])
    assert again is first and first.cpu_nodes == {0: 0, 1: 0, 2: 0, 3: 0}
    w(tmp_path, "proc/sys/net/netfilter/nf_conntrack_count", "11")
    now[0] = 2.0
    moved, _ = reader.read(["eth0"])
    assert moved is not first and moved.conntrack_count == 11 and moved.nics["eth0"] is first.nics["eth0"]
    w(tmp_path, "sys/class/net/eth0/statistics/rx_missed_errors", "5")
    now[0] = 3.0
    missed, _ = reader.read(["eth0"])
    assert missed is not moved and missed.nics["eth0"].rx_missed == 5
    now[0] = 9.0  # the slow facts read again: the same, so the same objects
    assert reader.read(["eth0"])[0] is missed
    w(tmp_path, "sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "performance")
    now[0] = 15.0
    gov, _ = reader.read(["eth0"])
    assert gov is not missed and gov.governors == {"performance": 1} and gov.cpu_nodes is missed.cpu_nodes


def test_live_conntrack_and_cstates_are_the_kernels_own(tmp_path):
    tuning, problems = TuningReader.live(LIVE).read(["lo"])
    path = Path("/proc/sys/net/netfilter/nf_conntrack_max")
    if not path.exists():
        pytest.skip("this kernel has no nf_conntrack")
    assert tuning.conntrack_max == int(path.read_text())
    states = sorted(Path("/sys/devices/system/cpu/cpu0/cpuidle").glob("state*"))
    assert len(tuning.idle_states) == len([s for s in states if (s / "disable").read_text().strip() == "0"])


def test_conntrack_near_full_on_the_real_tables_numbers():
    """nf_conntrack is built in, but nothing here can fill it (no nft/iptables to make
    entries): the real max, with the count put at 96 % of it."""
    with HostReader(LIVE, ["lo"]) as r:
        a = r.read()
        b = r.read()
    if b.tuning is None or not b.tuning.conntrack_max:
        pytest.skip("this kernel has no nf_conntrack")
    full = dataclasses.replace(b.tuning, conntrack_count=int(b.tuning.conntrack_max * 0.96))
    from nettop.doctor import evaluate
    found = {f.id: f for f in evaluate([Point(a, None), Point(dataclasses.replace(b, tuning=full), None)])}
    f = found["conntrack:host"]
    assert f.severity.label == "crit" and f.figures["max"] == b.tuning.conntrack_max
    assert f"nf_conntrack_max={2 * b.tuning.conntrack_max}" in (f.command or "")


def test_a_live_snapshot_with_its_tuning_round_trips_through_the_codec():
    with HostReader(LIVE) as r:
        snap = r.read()
    assert snap.tuning is not None
    skeleton, ints, floats = codec.split(snap)
    assert codec.join(json.loads(skeleton), ints, floats) == snap


def test_a_recording_made_before_the_doctor_decodes_with_no_tuning(tmp_path):
    import shutil
    for f in (DATA / "recording").glob("format1.nettop*"):
        shutil.copy(f, tmp_path / f.name)
    reader = Reader(str(tmp_path / "format1.nettop"))
    try:
        snaps = list(reader.snapshots())
    finally:
        reader.close()
    assert snaps and all(s.tuning is None for s in snaps)


def test_findings_become_events_when_they_appear_and_resolve():
    bad, good = FakeHost(conntrack=(90, 100)), FakeHost(conntrack=(10, 100))
    watch, tl = Watch(), Timeline()
    watch.observe(Point(bad.snapshot(0.0), None), tl)
    watch.observe(Point(bad.snapshot(1.0), None), tl)
    fixed = good.snapshot(2.0)
    watch.observe(Point(fixed, None), tl)
    texts = [e.text for e in tl.events() if e.kind == EVENT_KIND]
    assert texts[0].startswith("warn conntrack:host: conntrack table 90 % full")
    assert texts[1:] == ["resolved conntrack:host"]


def test_the_before_after_of_a_fix_says_resolved_or_not_with_figures():
    bad = FakeHost(conntrack=(90, 100))
    watch = Watch(settle_s=1.0)
    watch.observe(Point(bad.snapshot(0.0), None))
    (f,) = watch.shown()
    watch.applied(f, "sysctl -w net.netfilter.nf_conntrack_max=200", f.window[1])
    watch.observe(Point(bad.snapshot(0.5), None))
    assert watch.verdicts[f.id].resolved is None  # not settled yet
    watch.observe(Point(FakeHost(conntrack=(85, 100)).snapshot(2.0), None))
    v = watch.verdicts[f.id]
    assert v.resolved is False and "NOT resolved" in v.text() and "count 90 -> 85" in v.text()
    watch.applied(f, "again", 1_700_000_002.0)
    watch.observe(Point(FakeHost(conntrack=(10, 100)).snapshot(4.0), None))
    assert watch.verdicts[f.id].resolved is True and "resolved" in watch.verdicts[f.id].text()
    watch.dismiss("conntrack:host")
    watch.observe(Point(bad.snapshot(5.0), None))
    assert watch.shown() == [] and watch.findings


def test_the_report_section_lists_recorded_findings_and_the_last_windows():
    host = FakeHost(dropped={1: 5}, sysctls={"net.core.netdev_max_backlog": "1000"})
    watch, tl = Watch(), Timeline()
    for p in host.points():
        watch.observe(p, tl)
    text = section(tl.events(), host.points())
    assert "| softnet drops 5.0/s" not in text  # the event text starts with the severity
    assert "crit softnet-drops:host" in text
    assert "`nettop set sysctl net.core.netdev_max_backlog 2048`" in text


def _bloated(t: float, p50: float):
    """A bufferbloat host's snapshot at `t` whose probes gave `p50` ms over its tick."""
    from nettop.ping.stats import LatencyStats

    snap = FakeHost(rtt={"peer": (0.5, 10.0)}, qdiscs={"eth0": [("tbf", 500)]}).snapshot(t)
    return dataclasses.replace(snap, latency={"peer": LatencyStats("peer", "peer", 10, 10, 0.0, p50, p50, p50,
                                                                   0.0, p50, p50, p50)})


def test_a_watch_at_a_tenth_of_a_second_keeps_a_few_ticks_whole_and_every_ticks_probes():
    from nettop.doctor.engine import evaluate_window
    from nettop.doctor.watch import WHOLE_PER_WINDOW
    from nettop.doctor.window import Window

    watch = Watch()
    window_s = watch.config.window_s
    spacing = window_s / WHOLE_PER_WINDOW
    every: list[Point] = []
    for n in range(150):  # 15 s at -i 0.1: three windows
        t = n / 10
        point = Point(_bloated(t, 5.0 + n), None)  # each tick's p50 its own
        every.append(point)
        watch.observe(point)
        w = watch.window()
        kept = watch._points  # the ticks kept whole
        assert kept[-1] is point
        assert len(kept) <= WHOLE_PER_WINDOW + 3
        gaps = [b.snapshot.t_mono - a.snapshot.t_mono for a, b in zip(kept, list(kept)[1:-1])]
        assert all(g >= spacing - 1e-9 for g in gaps)
        if t >= window_s:  # the window spans all but one spacing of window_s
            assert window_s - spacing - 0.1 - 1e-9 <= w.elapsed <= window_s + 1e-9
        # every tick after the window's first gives its probes, in order, whole or not
        want = [p.snapshot.latency["peer"] for p in every if w.first.t_mono < p.snapshot.t_mono]
        assert w.latency()["peer"] == (want or [point.snapshot.latency["peer"]])  # (one sample: its own)
    # and the rules find what they find over the same span with every tick kept whole
    full = evaluate_window(Window([p for p in every if p.snapshot.t_mono >= w.first.t_mono], watch.config.window_s,
                                  (), watch._idle_rtt), watch.config)
    assert [f.id for f in watch.findings] == [f.id for f in full] and "bufferbloat:eth0" in {f.id for f in full}
    assert [f.figures for f in watch.findings] == [f.figures for f in full]


def test_a_watch_at_half_a_second_or_more_keeps_every_tick_whole():
    from nettop.doctor.watch import WHOLE_PER_WINDOW

    for interval in (1.0, Watch().config.window_s / WHOLE_PER_WINDOW):
        watch = Watch()
        points = [Point(_bloated(n * interval, 5.0 + n), None) for n in range(30)]
        for p in points:
            watch.observe(p)
        within = [p for p in points if points[-1].snapshot.t_mono - p.snapshot.t_mono <= watch.config.window_s + 1e-6]
        assert list(watch._points) == within  # as before the thinning: every tick of the window whole
        assert watch.window().first is within[0].snapshot
