"""The live view reads every tick only the settings of the queue rows it draws.

A shown interface's other queues (and their IRQs' affinity) are read in rotation and
say how old they are; the rows drawn, the IRQs a user follows and whatever nettop
changed are read every tick (nettop/collectors/settings_rotation.py, HostReader's
`screen_queues`). The generated tree gives exact file counts with a stepped clock; the
lab veth shows a change written by another tool on the real kernel; the Pilot tests
show the rows drawn reaching the source, and scrolling changing them.
"""

from __future__ import annotations

import time

from lab import run
from stepped_clock import SteppedClock
from test_settings_rotation import QUEUES, all_read_at, settings_opens, tree  # noqa: F401 (fixture)

from nettop.collectors.host import HostReader
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.snapshot import Snapshot, setting_age


def _queue(snap: Snapshot, ifname: str, kind: str, index: int):  # type: ignore[no-untyped-def]
    return next(q for q in snap.devices[ifname].queues if (q.kind, q.index) == (kind, index))


def _irqs_of(snap: Snapshot, ifname: str, kind: str, index: int) -> tuple[int, ...]:
    return next(q.irqs for q in snap.queue_maps[ifname].queues if (q.kind, q.index) == (kind, index))


# --- the generated tree: what is read, exactly -----------------------------------------


def test_only_the_drawn_rows_of_a_shown_interface_are_read_every_tick(tree):  # noqa: F811
    """GIVEN eth0 on screen with one combined row drawn WHEN ticks pass THEN that row's
    rx/tx settings, BQL and IRQ affinity are from every tick, and the rest of eth0 rotates
    (each value within the period, a tenth of the files a tick) instead of being read whole."""
    clock = SteppedClock(start=1000.0)
    with HostReader(SysRoot(str(tree)), on_screen=["eth0"], clock=clock) as reader:
        first, _ = settings_opens(reader)
        kind = first.queue_maps["eth0"].queues[3].kind
        reader.screen_queues = {"eth0": frozenset({(kind, 3)})}
        irqs = _irqs_of(first, "eth0", kind, 3)
        assert irqs
        counts = []
        for _ in range(12):
            snap, n = settings_opens(reader)
            counts.append(n)
            t = snap.t_mono
            sides = ("rx", "tx") if kind == "combined" else (kind,)
            assert all(_queue(snap, "eth0", k, 3).read_at == t for k in sides)
            assert next(b for b in snap.devices["eth0"].bql if b.queue == 3).read_at == t
            assert all(snap.irq_affinity[i].read_at == t for i in irqs)
            ages = [setting_age(t, r) for r in all_read_at(snap)]
            assert max(ages) <= 10.0 and sum(1 for r in all_read_at(snap) if r == t) < QUEUES
        everything = QUEUES * 12
        # the row's 2 + 6 + 4 files, plus a tenth of the rest (give or take one item)
        row = 2 + 6 + 4 * len(irqs)
        assert max(counts) <= row + everything / 10 + 7, counts
        assert min(counts) >= row, counts


def test_scrolling_to_other_rows_reads_them_on_the_next_tick_and_all_rows_when_none_are_named(tree):  # noqa: F811
    clock = SteppedClock(start=1000.0)
    with HostReader(SysRoot(str(tree)), on_screen=["eth0"], clock=clock) as reader:
        snap = reader.read()
        kind = snap.queue_maps["eth0"].queues[0].kind
        reader.screen_queues = {"eth0": frozenset({(kind, 0)})}
        for _ in range(3):
            reader.read()
        reader.screen_queues = {"eth0": frozenset({(kind, 40), (kind, 41)})}  # scrolled
        snap = reader.read()
        for i in (40, 41):
            assert _queue(snap, "eth0", "rx", i).read_at == snap.t_mono
            assert all(snap.irq_affinity[n].read_at == snap.t_mono for n in _irqs_of(snap, "eth0", kind, i))
        # record/serve: no rows named, every queue of an interface on screen
        reader.screen_queues = None
        snap, n = settings_opens(reader)
        assert set(all_read_at(snap)) == {snap.t_mono} and n == QUEUES * 12 + 1


def test_nettops_own_change_reads_the_whole_interface_on_the_next_tick(tree):  # noqa: F811
    path = tree / "sys/class/net/eth0/queues/rx-50/rps_cpus"
    old = path.read_text()
    try:
        with HostReader(SysRoot(str(tree)), on_screen=["eth0"], clock=SteppedClock(start=1000.0),
                        settings_period_s=3600.0) as reader:
            reader.read()
            reader.screen_queues = {"eth0": frozenset()}  # nothing of eth0 drawn
            reader.read()
            path.write_text("000000f0\n")
            reader.settings_changed(ifnames=["eth0"])
            assert _queue(reader.read(), "eth0", "rx", 50).rps_cpus == "000000f0"
    finally:
        path.write_text(old)


# --- the real kernel ---------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:  # one write(2), as `echo 3 > path` does
        f.write(text)


def test_another_tools_change_shows_next_tick_on_a_drawn_row_and_within_the_period_with_its_age_off_it(veth_lab):
    """GIVEN a 4-queue veth on screen with only rx-1's row drawn WHEN rps_cpus of rx-1 and
    of rx-2 are written directly (as `echo`) THEN rx-1's shows on the next tick, and
    rx-2's within the rotation period, never claimed newer than it is."""
    ifname = veth_lab.host_if
    period = 2.0
    base = f"/sys/class/net/{ifname}/queues"
    before = {i: open(f"{base}/rx-{i}/rps_cpus").read() for i in (1, 2)}
    try:
        with HostReader(LIVE, [ifname], on_screen=[ifname], settings_period_s=period) as reader:
            snap = reader.read()
            assert sum(1 for q in snap.devices[ifname].queues if q.kind == "rx") == 4
            kinds = {q.kind for q in snap.queue_maps[ifname].queues} or {"rx"}
            reader.screen_queues = {ifname: frozenset((k, 1) for k in kinds)}
            for _ in range(3):
                reader.read()
                time.sleep(0.1)
            _write(f"{base}/rx-1/rps_cpus", "3\n")
            _write(f"{base}/rx-2/rps_cpus", "2\n")
            t_change = time.monotonic()
            snap = reader.read()
            q1 = _queue(snap, ifname, "rx", 1)
            assert (q1.rps_cpus, q1.read_at) == ("3", snap.t_mono)
            seen = None
            while time.monotonic() - t_change < period + 1.0:
                q2 = _queue(snap, ifname, "rx", 2)
                if q2.rps_cpus == "2":
                    seen = time.monotonic() - t_change
                    assert q2.read_at is not None and q2.read_at > t_change
                    break
                # the old value says how old it is: read before the change
                assert q2.read_at is not None and q2.read_at <= t_change
                assert setting_age(snap.t_mono, q2.read_at) >= snap.t_mono - t_change
                time.sleep(0.1)
                snap = reader.read()
                assert _queue(snap, ifname, "rx", 1).read_at == snap.t_mono
            assert seen is not None and seen <= period + 0.5, seen
            # queues that appear (channels changed by ethtool) are read at once, drawn or not
            run(["ethtool", "-L", ifname, "rx", "2", "tx", "2"])
            reader.read()
            run(["ethtool", "-L", ifname, "rx", "4", "tx", "4"])
            snap = reader.read()
            for i in (2, 3):
                q = _queue(snap, ifname, "rx", i)
                assert (q.rps_cpus, q.read_at) == ("0", snap.t_mono)
    finally:
        for i, text in before.items():
            _write(f"{base}/rx-{i}/rps_cpus", text)


# --- the live view: the rows drawn reach the source --------------------------------------


def _told(rows: dict) -> set[tuple[str, str, str]]:
    return {(n, k, str(i)) for n, r in rows.items() for k, i in r}


async def test_the_rows_drawn_reach_the_source_and_scrolling_or_resizing_changes_them():
    """GIVEN 2 x 128 queues on screen at 120x40 WHEN the first point is drawn (no rates
    yet, so no queue rows) THEN the source is told whole interfaces; WHEN a tick with
    rates is drawn THEN it is told the queue rows on screen (and the BQL rows), not all
    512; WHEN the operator scrolls to the end, or the terminal grows, THEN, before the
    next tick, it is told the rows now drawn."""
    from nettop.tui.app import NettopApp
    from nettop.tui.scripted import ScriptedSource, synthetic
    from nettop.tui.tables import BqlTable, QueueTable

    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        src.push(synthetic(0, queues=128))
        await pilot.pause()
        assert src.settings_shown == (["eth0", "veth0"], None)
        for i in range(1, 3):
            src.push(synthetic(i, queues=128))
            await pilot.pause()
        table = app.query_one(QueueTable)
        keys = table.row_keys()
        assert len(keys) == 512
        assert src.settings_shown is not None
        names, rows = src.settings_shown
        assert names == ["eth0", "veth0"] and rows is not None
        span = table.shown_span()
        assert span is not None and span[0] == 0 and 0 < span[1] - span[0] <= table.size.height
        drawn = {tuple(k.split("/")) for k in keys[span[0]:span[1]]}
        bql_span = app.query_one(BqlTable).shown_span()
        assert bql_span is not None
        bql = {("eth0", "tx", k.split("-")[-1]) for k in app.query_one(BqlTable).row_keys()[slice(*bql_span)]}
        assert _told(rows) == drawn | bql, (_told(rows) - drawn - bql, drawn - _told(rows))
        assert len(_told(rows)) < 100

        height = span[1] - span[0]
        await pilot.resize_terminal(120, 60)
        await pilot.pause()
        span = table.shown_span()
        assert span is not None and span[1] - span[0] > height
        assert {tuple(k.split("/")) for k in keys[slice(*span)]} <= _told(src.settings_shown[1])

        table.focus()
        await pilot.press("end")
        await pilot.pause()
        told = _told(src.settings_shown[1])
        assert tuple(keys[-1].split("/")) in told and tuple(keys[0].split("/")) not in told
        span = table.shown_span()
        assert span is not None and {tuple(k.split("/")) for k in keys[slice(*span)]} <= told


async def test_the_summary_keeps_its_interfaces_queues_all_on_screen():
    """At 80x24 the summary names each interface's hottest queue and its CPUs, a queue that
    can change every tick and shows no age: the source is told whole interfaces."""
    from nettop.tui.app import NettopApp
    from nettop.tui.scripted import ScriptedSource, synthetic

    src = ScriptedSource()
    app = NettopApp(src)
    async with app.run_test(size=(80, 24)) as pilot:
        for i in range(2):
            src.push(synthetic(i, queues=16))
            await pilot.pause()
        assert app.summary_shown()
        assert src.settings_shown == (["eth0", "veth0"], None)
