"""Queue and IRQ settings: every tick on screen, in rotation off it, at once after nettop's
own changes, and never older than the snapshot says (nettop/collectors/settings_rotation.py).

The generated tree gives exact file counts with a stepped clock; the lab veth shows that
changes made by other tools (`tee` into sysfs, `ethtool -L`, `ip link set`) and by
nettop's actions reach the snapshot within the stated time on the real kernel.
"""

from __future__ import annotations

import os
import time

import pytest
from lab import run

from nettop.actions import Change, Journal, Tuner
from nettop.actions.rps_xps import RpsCpus
from nettop.collectors.host import HostReader
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.snapshot import Snapshot, setting_age
from nettop.pipeline import LivePipeline
from nettop.pipeline.notices import JournalWatch
from treegen import generate_tree
from stepped_clock import SteppedClock

QUEUES = 64


def settings_opens(reader: HostReader) -> tuple[Snapshot, int]:
    """One tick, and how many queue-setting and IRQ-affinity files it opened."""
    opened: list[str] = []
    real = os.open

    def counting(path, flags, *a, dir_fd=None, **kw):  # type: ignore[no-untyped-def]
        # a file opened relative to a held directory is named by that directory's path
        opened.append(str(path) if dir_fd is None else f"{os.readlink(f'/proc/self/fd/{dir_fd}')}/{path}")
        return real(path, flags, *a, dir_fd=dir_fd, **kw)

    os.open = counting  # type: ignore[assignment]
    try:
        snap = reader.read()
    finally:
        os.open = real  # type: ignore[assignment]
    return snap, sum(1 for p in opened if "/queues/" in p or "/proc/irq/" in p)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return generate_tree(tmp_path_factory.mktemp("rot") / "host256", cpus=256, irqs=300, queues=QUEUES)


def all_read_at(snap: Snapshot) -> list[float | None]:
    dev = snap.devices["eth0"]
    return [q.read_at for q in dev.queues] + [b.read_at for b in dev.bql] + \
        [a.read_at for a in snap.irq_affinity.values()]


def test_off_screen_settings_cost_a_tenth_per_tick_and_all_are_reread_within_the_period(tree):
    with HostReader(SysRoot(str(tree)), clock=SteppedClock(start=1000.0)) as reader:
        first, everything = settings_opens(reader)
        # 64 rx queues x 2 files, 64 tx queues x (2 + 4 BQL), 64 queue IRQs x 4 (and the
        # tree's one mapped IRQ without a /proc/irq directory: one failed open)
        assert everything == QUEUES * 2 + QUEUES * 6 + QUEUES * 4 + 1
        counts = []
        for _ in range(20):
            snap, n = settings_opens(reader)
            counts.append(n)
            # nothing is older than the period, and the snapshot says how old each is
            ages = [setting_age(snap.t_mono, t) for t in all_read_at(snap)]
            assert len(ages) == QUEUES * 4 and max(ages) <= 10.0
            # each says the tick that read it: a few this one, the rest earlier ones
            fresh = sum(1 for t in all_read_at(snap) if t == snap.t_mono)
            assert 0 < fresh < QUEUES and None not in all_read_at(snap)
        # a tenth of the files per tick (10 s period at 1 s), give or take one item
        assert max(counts) <= everything / 10 + 6, counts
        assert sum(counts[10:]) <= everything + 60, counts
        assert len(snap.devices["eth0"].queues) == 2 * QUEUES and len(snap.devices["eth0"].bql) == QUEUES


def test_a_host_with_more_files_than_the_rate_allows_rotates_over_a_longer_stated_period(tree):
    """768 files at 32 a second: 24 s, not 10 (a 4 x 128-queue host's 6,100 files at the
    default 256 a second give 24 s too); every value is still re-read within it."""
    # (+ 1: the mapped IRQ without a /proc/irq directory rotates too, at one failed open)
    everything = QUEUES * 2 + QUEUES * 6 + QUEUES * 4 + 1
    with HostReader(SysRoot(str(tree)), clock=SteppedClock(start=1000.0), settings_files_per_s=32) as reader:
        settings_opens(reader)
        counts, oldest = [], 0.0
        for _ in range(60):
            snap, n = settings_opens(reader)
            counts.append(n)
            oldest = max(oldest, *(setting_age(snap.t_mono, t) for t in all_read_at(snap)))
        assert reader._settings.period() == pytest.approx(everything / 32)
        assert max(counts) <= 32 + 6, counts  # the budget, give or take one item
        assert sum(counts[-24:]) >= everything - 40, counts  # yet all of them within the period
        assert 10.0 < oldest <= everything / 32, oldest


def test_on_screen_interface_is_read_whole_every_tick(tree):
    with HostReader(SysRoot(str(tree)), on_screen=["eth0"], clock=SteppedClock(start=1000.0)) as reader:
        _, everything = settings_opens(reader)
        for _ in range(3):
            snap, n = settings_opens(reader)
            assert n == everything == QUEUES * 12 + 1
            assert set(all_read_at(snap)) == {snap.t_mono}  # all from this tick


def test_a_change_off_screen_shows_within_the_period_and_is_never_claimed_fresh(tree, tmp_path):
    path = tree / "sys/class/net/eth0/queues/rx-5/rps_cpus"
    old = path.read_text()
    clock = SteppedClock(start=1000.0)
    try:
        with HostReader(SysRoot(str(tree)), clock=clock) as reader:
            for _ in range(5):
                reader.read()
            path.write_text("0000000f\n")
            changed = clock.t
            for tick in range(1, 12):
                snap = reader.read()
                q = next(q for q in snap.devices["eth0"].queues if (q.kind, q.index) == ("rx", 5))
                read = snap.t_mono - setting_age(snap.t_mono, q.read_at)
                if q.rps_cpus == "0000000f":
                    assert read > changed
                    break
                assert read <= changed  # the old value says it is older
            assert tick <= 10, "not re-read within the 10 s period"
            # nettop says it changed rx-5: read on the next tick
            path.write_text("000000ff\n")
            reader.settings_changed(ifnames=["eth0"])
            q = next(q for q in reader.read().devices["eth0"].queues if (q.kind, q.index) == ("rx", 5))
            assert q.rps_cpus == "000000ff"
    finally:
        path.write_text(old)


# --- the real kernel --------------------------------------------------------------------


def _rps(snap: Snapshot, ifname: str, index: int) -> tuple[str | None, float]:
    q = next(q for q in snap.devices[ifname].queues if (q.kind, q.index) == ("rx", index))
    return q.rps_cpus, setting_age(snap.t_mono, q.read_at)


def _tee(path: str, text: str) -> None:
    run(["tee", path], input=text)  # as `echo 3 > path` in a shell


def test_other_tools_changes_show_next_tick_on_screen_and_within_the_period_off_it(veth_lab):
    ifname = veth_lab.host_if
    period = 2.0
    with HostReader(LIVE, [ifname], settings_period_s=period) as on, \
            HostReader(LIVE, [ifname], on_screen=(), settings_period_s=period) as off:
        for _ in range(3):
            on.read(), off.read()
            time.sleep(0.1)
        _tee(f"/sys/class/net/{ifname}/queues/rx-1/rps_cpus", "3\n")
        run(["ip", "link", "set", ifname, "txqueuelen", "1234"])
        t_change = time.monotonic()
        snap = on.read()
        assert _rps(snap, ifname, 1) == ("3", 0.0)
        assert snap.links[ifname].txqueuelen == 1234
        assert off.read().links[ifname].txqueuelen == 1234  # the link dump: every tick
        seen = None
        while time.monotonic() - t_change < period + 1.0:
            snap = off.read()
            mask, age = _rps(snap, ifname, 1)
            if mask == "3":
                seen = time.monotonic() - t_change
                break
            assert snap.t_mono - age <= t_change  # an old value is never claimed to be newer
            time.sleep(0.1)
        assert seen is not None and seen <= period + 0.5, seen
        # channels changed by ethtool: queues that appear are read at once, on screen or not
        run(["ethtool", "-L", ifname, "rx", "2", "tx", "2"])
        for reader in (on, off):
            qs = reader.read().devices[ifname].queues
            assert [(q.kind, q.index) for q in qs] == [("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)]
        run(["ethtool", "-L", ifname, "rx", "4", "tx", "4"])
        for reader in (on, off):
            qs = reader.read().devices[ifname].queues
            assert len(qs) == 8 and all(q.rps_cpus == "0" for q in qs if q.kind == "rx" and q.index >= 2)


def test_a_change_through_nettops_actions_shows_on_the_next_tick_off_screen(veth_lab, tmp_path, monkeypatch):
    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path))
    ifname = veth_lab.host_if
    tuner = Tuner(Journal(), read_only=None)  # the default journal, as the live view's
    with HostReader(LIVE, [ifname], on_screen=(), settings_period_s=3600.0) as reader:
        pipeline = LivePipeline(reader=reader, doctor=False)
        pipeline.show_settings([])  # the consumer shows nothing: all in rotation, and the journal watched
        assert isinstance(reader.settings_notices.__self__, JournalWatch)  # type: ignore[union-attr]
        for _ in range(3):
            reader.read()
        try:
            tuner.apply(tuner.plan([Change(RpsCpus(ifname, 2), "1")]))
            assert _rps(reader.read(), ifname, 2) == ("2", 0.0)
            tuner.undo()
            assert _rps(reader.read(), ifname, 2) == ("0", 0.0)
        finally:
            tuner.revert_all()


def test_journal_watch_names_what_each_new_line_changes(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"op":"begin","id":1,"setting":{"kind":"rps_cpus","params":{"ifname":"old0","queue":0}}}\n')
    watch = JournalWatch(str(path))
    assert watch.poll() == (set(), set())  # what was there before is not news
    with path.open("a") as f:
        f.write('{"op":"begin","id":2,"setting":{"kind":"irq_affinity","params":{"irq":42}}}\n'
                '{"op":"begin","id":3,"setting":{"kind":"rps_cpus","params":{"ifname":"eth7","queue":1}}}\n'
                '{"op":"end","id":2}\n{"op":"begin","id":4,"setting":{"kind":"rps')
    assert watch.poll() == ({"eth7"}, {42})
    with path.open("a") as f:
        f.write('_cpus","params":{"ifname":"eth9","queue":1}}}\nnot json\n{"op":"end","id":3}\n')
    assert watch.poll() == ({"eth9", "eth7"}, set())
    assert watch.poll() == (set(), set())


def test_what_a_quiet_interface_gives_out_tick_after_tick_equals_a_fresh_build(tmp_path):
    """The rotation keeps each interface's last output and its rotation items while the
    listing stays and no queue of it is read again; through queue files that change,
    queues that go and come back, a device that loses BQL and nettop's notices, every
    tick equals a rotation that builds everything afresh."""
    import shutil

    from nettop.collectors.settings_rotation import SettingsRotation

    tree = generate_tree(tmp_path / "t", cpus=16, irqs=60, queues=8, nics=2)
    root = SysRoot(str(tree))
    links = {"eth0": 2, "eth1": 3}
    irqs = list(range(24, 42))
    kept, fresh = SettingsRotation(root, 4.0, 40), SettingsRotation(root, 4.0, 40)  # 200 files: 5 s
    q = tree / "sys/class/net/eth1/queues"
    steps = {
        3: lambda: (q / "rx-5/rps_cpus").write_text("000000ff\n"),
        5: lambda: shutil.move(q / "tx-7", tmp_path / "tx-7"),
        7: lambda: (q / "tx-2/xps_cpus").write_text("00000004\n"),
        9: lambda: shutil.move(tmp_path / "tx-7", q / "tx-7"),
        11: lambda: kept.notice(["eth1"], [30]) or fresh.notice(["eth1"], [30]),
        13: lambda: [shutil.rmtree(d / "byte_queue_limits") for d in q.glob("tx-*")],
    }
    gave_out_kept = 0
    for tick in range(24):
        steps.get(tick, lambda: None)()
        for st in fresh._ifaces.values():
            st.out = st.items = None
        outs = [r.read(1000.0 + tick, links, lambda n: False, (), irqs) for r in (kept, fresh)]
        assert outs[0] == outs[1], tick
        gave_out_kept += sum(outs[0].queues[n] is kept._ifaces[(n, i)].out[1] for n, i in links.items())
        assert len(outs[0].bql["eth1"]) == (7 if 5 <= tick < 9 else 8) or tick >= 13
    assert gave_out_kept > 0
    last = {(c.kind, c.index): c for c in outs[0].queues["eth1"]}
    assert last[("rx", 5)].rps_cpus == "000000ff" and last[("tx", 2)].xps_cpus == "00000004"
    assert outs[0].bql["eth1"] == () and len(last) == 16


def test_each_interfaces_queues_are_listed_once_and_again_when_they_change_and_a_new_queue_shows_the_next(tmp_path):
    """The link reader, the queue map and the rotation share one listing of queues/ per
    interface per tick, kept from tick to tick while the directory's stat is the same
    (queue_config.KeptListings); a queue added in between changes it, so the next tick
    lists that interface again and shows the queue."""
    tree = generate_tree(tmp_path / "t", cpus=16, irqs=60, queues=8, nics=2)
    listed: list[str] = []
    real = os.listdir

    def counting(path="."):  # type: ignore[no-untyped-def]
        listed.append(str(path))
        return real(path)

    with HostReader(SysRoot(str(tree)), on_screen=["eth1"], clock=SteppedClock(start=1000.0)) as reader:
        reader.read()
        os.listdir = counting  # type: ignore[assignment]
        try:
            before = reader.read()
            for d in ("rx-8", "tx-8"):
                (tree / "sys/class/net/eth1/queues" / d).mkdir()
            (tree / "sys/class/net/eth1/queues/rx-8/rps_cpus").write_text("00000003\n")
            after = reader.read()
        finally:
            os.listdir = real  # type: ignore[assignment]
    queues = sorted(p.split("/")[-2] for p in listed if p.endswith("/queues"))
    assert queues == ["eth1"]  # the tick after eth1's queues changed, once
    assert before.links["eth1"].num_rx_queues == 8 and after.links["eth1"].num_rx_queues == 9
    assert ("rx", 8) not in {(q.kind, q.index) for q in before.devices["eth1"].queues}
    got = {(q.kind, q.index): q for q in after.devices["eth1"].queues}
    assert got[("rx", 8)].rps_cpus == "00000003" and ("tx", 8) in got


def _irq_files(tmp_path, irq: int, cpus: str) -> None:
    d = tmp_path / "proc" / "irq" / str(irq)
    d.mkdir(parents=True, exist_ok=True)
    for name, text in (("smp_affinity_list", cpus), ("effective_affinity_list", cpus.split("-")[0]),
                       ("affinity_hint", "0"), ("node", "0")):
        (d / name).write_text(text + "\n")


def test_an_irq_without_a_proc_irq_directory_counts_as_read_and_is_tried_again_at_the_rotations_pace(tmp_path):
    """GIVEN 20 IRQs with a /proc/irq/N and one (99) without, all off screen, a 10 s period;
    WHEN ticks pass a second apart; THEN 99's directory is tried once at first and then at
    the rotation's pace, not every tick; and once it appears it shows within the period."""
    from nettop.collectors.settings_rotation import SettingsRotation

    irqs = list(range(40, 60)) + [99]
    for i in irqs[:-1]:
        _irq_files(tmp_path, i, "0-3")
    rot = SettingsRotation(SysRoot(str(tmp_path)), 10.0, 256)
    tries: list[float] = []
    real = os.open

    def counting(path, flags, *a, dir_fd=None, **kw):  # type: ignore[no-untyped-def]
        if str(path).startswith("99/"):
            tries.append(t)
        return real(path, flags, *a, dir_fd=dir_fd, **kw)

    os.open = counting  # type: ignore[assignment]
    try:
        for t in range(1000, 1025):
            got = rot.read(float(t), {}, lambda name: False, (), irqs)
            assert 99 not in got.affinity and len(got.affinity) == 20
        assert tries[0] == 1000 and 2 <= len(tries) <= 4, tries  # not 25
        assert all(b - a >= 5 for a, b in zip(tries, tries[1:])), tries
        _irq_files(tmp_path, 99, "5")
        for t in range(1025, 1036):
            got = rot.read(float(t), {}, lambda name: False, (), irqs)
    finally:
        os.open = real  # type: ignore[assignment]
    assert got.affinity[99].affinity == (5,) and 1025 <= got.affinity[99].read_at <= 1035


def test_a_held_queues_directory_replaced_under_the_same_path_is_read_anew(tmp_path):
    """An interface removed and made again under the same name (the rotation keys its state
    by ifindex too, but a device moved out of the namespace and back keeps both): the files
    are read from the new directory, not reported missing through the old one."""
    import shutil

    from nettop.collectors.queue_config import QueueFiles, read_queues

    root = SysRoot(str(tmp_path))
    base = tmp_path / "sys" / "class" / "net" / "eth0" / "queues"
    files = QueueFiles(root, "eth0")
    try:
        for mask in ("f", "f0"):
            if base.exists():
                shutil.rmtree(base)  # the held fd now names a removed directory
            (base / "rx-0").mkdir(parents=True)
            (base / "rx-0" / "rps_cpus").write_text(mask + "\n")
            (base / "rx-0" / "rps_flow_cnt").write_text("0\n")
            got, problems = read_queues(root, "eth0", [("rx", 0)], None, 1.0, files)
            assert problems == [] and got[0].rps_cpus == mask
    finally:
        files.close()


def test_a_veth_made_again_under_the_same_name_is_read_through_the_held_directory(veth_lab):
    """On the real kernel: the held fd of a removed device's queues directory finds nothing
    (kernfs), and the directory of the device made again under the name is held instead."""
    from nettop.collectors.queue_config import QueueFiles, read_queues

    name = veth_lab.host_if
    files = QueueFiles(LIVE, name)
    try:
        got, problems = read_queues(LIVE, name, [("rx", 0), ("tx", 0)], None, 1.0, files)
        assert problems == [] and got[0].rps_cpus is not None and got[1].xps_cpus is not None
        run(["ip", "link", "del", name])
        try:
            run(["ip", "link", "add", name, "numtxqueues", "2", "numrxqueues", "2",
                 "type", "veth", "peer", "name", name[:-1] + "p"])
            _tee(f"/sys/class/net/{name}/queues/rx-1/rps_cpus", "1")
            got, problems = read_queues(LIVE, name, [("rx", 1), ("tx", 1)], None, 2.0, files)
            assert problems == [] and int(got[0].rps_cpus.replace(",", ""), 16) == 1
            assert got[1].xps_cpus is not None
        finally:
            run(["ip", "link", "del", name], check=False)
    finally:
        files.close()


def test_closing_the_reader_closes_the_held_settings_directories(tmp_path):
    """HostReader.close() lets go of every directory the settings rotation holds (one per
    interface's queues, one for /proc/irq): a program that opens and closes readers
    (tests, `nettop snapshot` over many captures) must not collect descriptors."""
    tree = generate_tree(tmp_path / "t", cpus=16, irqs=60, queues=8, nics=2)

    def held() -> list[str]:
        out = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(str(tree)) and os.path.isdir(target):
                out.append(target)
        return out

    reader = HostReader(SysRoot(str(tree)), clock=SteppedClock(1.0))
    for _ in range(3):
        reader.read()
    assert any(p.endswith("/queues") for p in held()) and any(p.endswith("/proc/irq") for p in held())
    reader.close()
    assert held() == []


def _held_files(prefix: str) -> int:
    """Files (not the held directories) this process has open under `prefix`."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        n += target.startswith(prefix) and not os.path.isdir(target)
    return n


def test_on_screen_settings_files_are_held_open_and_let_go_when_the_interface_leaves_the_screen(veth_lab):
    """The settings read every tick because they are on screen are held open (one pread a
    tick instead of open, read, close) and still show another tool's change on the next
    tick; the rotation holds none; an interface off screen lets its files go on the next
    tick, and the descriptors held are those of the screen, never more as ticks go by."""
    ifname = veth_lab.host_if

    def held_files() -> int:
        return _held_files(f"/sys/devices/virtual/net/{ifname}/queues/")

    with HostReader(LIVE, [ifname], on_screen=()) as reader:
        for _ in range(5):
            reader.read()
        assert held_files() == 0  # the rotation's reads hold nothing
        reader.on_screen = frozenset([ifname])
        for _ in range(3):
            reader.read()
        # 4 rx queues x (rps_cpus, rps_flow_cnt) + 4 tx x (xps_cpus, xps_rxqs); veth has no BQL
        assert not os.path.exists(f"/sys/class/net/{ifname}/queues/tx-0/byte_queue_limits")
        assert held_files() == 4 * 2 + 4 * 2
        _tee(f"/sys/class/net/{ifname}/queues/rx-2/rps_cpus", "2\n")
        assert _rps(reader.read(), ifname, 2) == ("2", 0.0)
        for _ in range(5):
            reader.read()
        assert held_files() == 16
        reader.screen_queues = {ifname: frozenset([("rx", 0), ("tx", 0)])}  # two rows drawn
        reader.read()
        reader.read()
        assert held_files() == 2 + 2
        opened: list[str] = []
        real_open = os.open

        def counting_open(path, *a, **kw):  # type: ignore[no-untyped-def]
            opened.append(str(path))
            return real_open(path, *a, **kw)

        os.open = counting_open  # type: ignore[assignment]
        try:
            reader.read()
        finally:
            os.open = real_open  # type: ignore[assignment]
        # read through held fds (veth has no BQL: its probe is one failed open a tick)
        assert not [p for p in opened if p.startswith(("rx-0/", "tx-0/")) and "byte_queue_limits" not in p]
        reader.screen_queues = {ifname: frozenset()}  # on screen, no row of it drawn
        reader.read()
        assert held_files() == 0
        reader.screen_queues = None
        reader.read()
        assert held_files() == 16
        reader.on_screen = frozenset()
        reader.read()
        assert held_files() == 0
    assert held_files() == 0


def test_the_irqs_and_bql_of_a_real_nic_on_screen_are_held_and_let_go():
    """eth0 here (virtio_net, MSI-X, BQL), only read: its IRQs' four /proc/irq files and
    its tx queues' BQL files are held while it is on screen, and let go after."""
    if not os.path.exists("/sys/class/net/eth0/queues/tx-0/byte_queue_limits"):
        pytest.skip("no eth0 with BQL on this machine")

    with HostReader(LIVE, ["eth0"], on_screen=["eth0"]) as reader:
        for _ in range(3):
            snap = reader.read()
        irqs = {i for q in snap.queue_maps["eth0"].queues for i in q.irqs} | set(snap.queue_maps["eth0"].other_irqs)
        if not irqs:
            pytest.skip("eth0 has no IRQs here")
        assert _held_files("/proc/irq/") == 4 * len(irqs)
        tx = sum(1 for q in snap.devices["eth0"].queues if q.kind == "tx")
        queues = os.path.realpath("/sys/class/net/eth0/queues") + "/"
        assert _held_files(queues) >= tx * 4  # the four BQL files of each tx queue, at least
        reader.on_screen = frozenset()
        reader.read()
        reader.read()
        assert _held_files("/proc/irq/") == 0 and _held_files(queues) == 0
