"""What the live sampler reads each tick (issue 29): values that come with a dump the
tick makes anyway are taken from it, and files held open are read again in place.

Each test compares the cheaper source with the one it replaces on the real kernel, in
a veth pair and namespace the test makes (tests/lab.py), and counts the opens of a tick.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

import pytest

from nettop.collectors import host_tuning
from nettop.collectors.host import HostReader
from nettop.collectors.interfaces import read_links
from nettop.kernel.rtnl import IFLA_STATS64, Rtnl, parse_link
from nettop.kernel.sysroot import LIVE

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@contextmanager
def opens() -> Iterator[Counter[str]]:
    """Paths os.open is asked for while inside (relative ones as "@name")."""
    seen: Counter[str] = Counter()
    real = os.open

    def counting(path, flags, *a, dir_fd=None, **kw):  # type: ignore[no-untyped-def]
        seen[path if dir_fd is None else "@" + str(path)] += 1
        return real(path, flags, *a, dir_fd=dir_fd, **kw)

    os.open = counting  # type: ignore[assignment]
    try:
        yield seen
    finally:
        os.open = real  # type: ignore[assignment]


def _link_message(stats: bytes) -> bytes:
    body = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 7, 0, 0)
    name = b"t0\0"
    body += struct.pack("=HH", 4 + len(name), 3) + name + b"\0" * (-len(name) % 4)
    body += struct.pack("=HH", 4 + len(stats), IFLA_STATS64) + stats
    return body


def test_ring_overflows_are_the_link_dumps_rx_over_fifo_and_missed_errors():
    # struct rtnl_link_stats64: field i holds 100 + i, so a wrong offset gives another sum
    fields = [100 + i for i in range(24)]
    full = _link_message(struct.pack("=24Q", *fields))
    msg = parse_link(memoryview(full), 0, len(full))
    assert msg.stats == tuple(fields[:10])
    assert msg.rx_missed == fields[11] + fields[14] + fields[15]  # rx_over, rx_fifo, rx_missed
    # an older, shorter struct: the counters but no ring overflows (sysfs is read then)
    short = _link_message(struct.pack("=10Q", *fields[:10]))
    msg = parse_link(memoryview(short), 0, len(short))
    assert msg.stats == tuple(fields[:10]) and msg.rx_missed is None


@root_only
def test_link_dump_ring_overflows_equal_the_sysfs_files(veth_lab):
    rtnl = Rtnl()
    try:
        missed: dict[str, int] = {}
        links, problems = read_links(LIVE, rtnl, None, missed)
    finally:
        rtnl.close()
    assert not problems and veth_lab.host_if in missed and set(missed) == set(links)
    for name in links:
        assert missed[name] == host_tuning.read_missed(LIVE, name, []), name


@root_only
def test_a_live_tick_opens_no_statistics_ifindex_or_unchanged_speed_file(veth_lab):
    names = os.listdir("/sys/class/net")
    with HostReader(LIVE, on_screen=names) as reader:
        reader.read()
        with opens() as seen:
            snap = reader.read()
        assert snap.tuning.nics[veth_lab.host_if].rx_missed == 0
    dumped = [p for p in seen if "/statistics/" in p or p.endswith("/ifindex")]
    assert not dumped, dumped  # both come with the tick's link dump
    assert not [p for p in seen if p.endswith("/speed")]  # no link changed since the last tick
    # the one-value files of every tick are held open (those this host has: all of them)
    held = [p for p in seen if p.startswith(("/proc/sys/", "/proc/uptime", "/sys/devices/system/cpu/o"))]
    assert not held, held


@root_only
def test_queue_maps_with_the_dumps_ifindexes_equal_those_read_from_sysfs(veth_lab):
    from nettop.collectors.queue_irqs import map_all
    from nettop.kernel.netdev_genl import NetdevNetlink, NetdevUnsupported

    with HostReader(LIVE) as reader:
        snap = reader.read()
    names = [veth_lab.host_if, *(n for n in snap.links if n != veth_lab.host_if)]
    try:
        nl = NetdevNetlink()
    except (NetdevUnsupported, OSError) as exc:
        pytest.skip(f"no netdev genetlink: {exc}")
    try:
        dumped, p1 = map_all(LIVE, names, snap.interrupts, nl, None,
                             {n: link.ifindex for n, link in snap.links.items()})
        with opens() as seen:
            read, p2 = map_all(LIVE, names, snap.interrupts, nl)
    finally:
        nl.close()
    assert dumped == read and p1 == p2
    assert f"/sys/class/net/{veth_lab.host_if}/ifindex" in seen  # what the dump's indexes spare


@root_only
def test_link_speeds_are_read_again_when_the_link_changes_and_equal_sysfs(veth_lab):
    from nettop.collectors.interfaces import SPEED_REFRESH_S, LinkSpeeds, _speed
    from lab import run

    host = veth_lab.host_if
    speeds = LinkSpeeds(LIVE)
    rtnl = Rtnl()
    t = 100.0

    def tick() -> tuple[dict[str, int | None], list[str]]:
        msgs = rtnl.links()
        with opens() as seen:
            got = speeds.of(msgs, t)
        assert got == {m.name: _speed(LIVE, m.name) for m in msgs}  # what sysfs says now
        return got, sorted(p.split("/")[4] for p in seen if p.endswith("/speed"))

    try:
        got, read = tick()
        assert got[host] == 10000 and host in read  # first seen: read
        assert tick()[1] == []  # nothing changed: nothing read
        run(["ip", "link", "set", host, "down"])  # operstate (and carrier) change
        got, read = tick()
        assert read == [host] and got[host] is None  # a link down has no speed
        run(["ip", "link", "set", host, "up"])
        veth_lab.ns_run(["ip", "link", "set", veth_lab.peer_if, "down"])  # carrier of host's end
        assert tick()[1] == [host]
        speeds.notice([host])
        assert tick()[1] == [host]  # nettop changed it: read on the next tick
        assert tick()[1] == []
        t += SPEED_REFRESH_S  # every speed read again within the refresh period
        assert len(tick()[1]) == len(rtnl.links())
    finally:
        rtnl.close()


_IN_NETNS = r"""
import json, subprocess, sys
from nettop.kernel.held_files import HeldFiles
from nettop.kernel.sysroot import LIVE
rel = "proc/sys/net/ipv4/tcp_rmem"  # one of the tick's sysctls, and one a namespace has its own of
files = HeldFiles(LIVE)
before = files.read_line(rel)
subprocess.run(["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 65536 " + sys.argv[1]], check=True)
after = files.read_line(rel)
print(json.dumps([before.split(), after.split(), files.held]))
"""


@root_only
def test_a_held_sysctl_shows_a_change_made_by_another_process(veth_lab):
    import subprocess
    import sys
    from pathlib import Path

    rel = "/proc/sys/net/ipv4/tcp_rmem"
    outside = Path(rel).read_text()
    top = str(7_000_000 + os.getpid() % 1000)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    got = subprocess.run(veth_lab.ns([sys.executable, "-c", _IN_NETNS, top]), env=env,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    before, after, held = json.loads(got.stdout)
    assert before != ["4096", "65536", top]  # the first read: the namespace's old value
    assert after == ["4096", "65536", top]  # the change, through the same descriptor
    assert held == 1  # read again through the descriptor held open, not a new one
    assert Path(rel).read_text() == outside  # the root namespace's is untouched


_LINES_IN_NETNS = r"""
import json, subprocess, sys
from nettop.collectors.host_config import read_sysctls
from nettop.kernel.held_files import HeldFiles
from nettop.kernel.sysroot import LIVE
rels = ["proc/sys/net/ipv4/tcp_rmem", "proc/sys/net/nonexistent_sysctl", "proc/sys/net/core/somaxconn"]
files = HeldFiles(LIVE)
first = files.read_lines(rels)
subprocess.run(["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 65536 " + sys.argv[1],
                "net.core.somaxconn=" + sys.argv[2]], check=True)
second = files.read_lines(rels)
held = files.held
values, problems = read_sysctls(LIVE, ("net.ipv4.tcp_rmem", "net.core.somaxconn", "net.nope"), files)
print(json.dumps([[x if isinstance(x, str) else type(x).__name__ for x in got] for got in (first, second)]
                 + [held, values, [p.text for p in problems]]))
"""


@root_only
def test_held_sysctls_read_in_one_pass_show_another_processs_change_and_a_missing_one(veth_lab):
    """`read_lines` (the tick's sysctls in one pread pass) gives what `read_line` would:
    the change another process made, through the held descriptors, and a sysctl that does
    not exist as its FileNotFoundError in its place (read_sysctls leaves it out)."""
    import subprocess
    import sys
    from pathlib import Path

    top, conns = str(6_000_000 + os.getpid() % 1000), str(3000 + os.getpid() % 1000)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    got = subprocess.run(veth_lab.ns([sys.executable, "-c", _LINES_IN_NETNS, top, conns]), env=env,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    first, second, held, values, problems = json.loads(got.stdout)
    assert first[1] == second[1] == "FileNotFoundError"
    assert first[0].split() != ["4096", "65536", top] and first[2] != conns
    assert second[0].split() == ["4096", "65536", top] and second[2] == conns
    assert held == 2  # both existing files read again through their descriptors
    assert values == {"net.ipv4.tcp_rmem": f"4096 65536 {top}", "net.core.somaxconn": conns}
    assert problems == []


@root_only
def test_a_file_found_absent_is_asked_for_again_only_after_the_absent_time_of_ticks():
    """An absent one-value file (a sysctl of a module not loaded yet) is not opened again
    each tick: it fails from memory for ABSENT_S seconds of the reader's ticks, then is
    opened again and shows; without tick times (`now` None) every read opens it."""
    from nettop.kernel.held_files import ABSENT_S, HeldFiles
    from lab import run

    name = f"ntl{os.getpid()}x8a"
    rel = f"sys/class/net/{name}/mtu"
    files, plain = HeldFiles(LIVE), HeldFiles(LIVE)
    try:
        files.now = 1000.0
        with pytest.raises(FileNotFoundError) as first:
            files.read_line(rel)
        with pytest.raises(FileNotFoundError):
            plain.read_line(rel)
        run(["ip", "link", "add", name, "mtu", "1400", "type", "veth"])
        files.now += ABSENT_S - 1
        with pytest.raises(FileNotFoundError) as again:  # from memory: not opened
            files.read_line(rel)
        assert again.value.filename == first.value.filename == f"/{rel}"
        assert files.read_lines([rel, "proc/uptime"])[0].__class__ is FileNotFoundError
        assert plain.read_line(rel) == "1400"  # no tick times: opened each time
        files.now += 1
        assert files.read_line(rel) == "1400"  # ABSENT_S later: opened, and there
    finally:
        run(["ip", "link", "del", name], check=False)
        files.close()
        plain.close()


@root_only
def test_held_files_follow_uptime_an_interface_recreated_and_stay_within_budget():
    from nettop.kernel.held_files import HeldFiles
    from lab import run

    name = f"ntl{os.getpid()}x9h"
    files = HeldFiles(LIVE, max_open=2)
    try:
        run(["ip", "link", "add", name, "mtu", "1400", "type", "veth"])
        a = float(files.read_line("proc/uptime").split()[0])
        assert files.read_line(f"sys/class/net/{name}/mtu") == "1400"
        run(["ip", "link", "del", name])  # the held attribute's device is gone (ENODEV)...
        with pytest.raises(FileNotFoundError):
            files.read_line(f"sys/class/net/{name}/mtu")  # ...and a fresh open says so
        run(["ip", "link", "add", name, "mtu", "1300", "type", "veth"])
        assert files.read_line(f"sys/class/net/{name}/mtu") == "1300"  # the new device's
        assert files.read_line("sys/devices/system/cpu/online") == Path("/sys/devices/system/cpu/online").read_text().strip()
        assert files.held == 2  # the third file is opened each time, past the budget
        import time
        time.sleep(0.05)
        assert float(files.read_line("proc/uptime").split()[0]) > a  # regenerated at offset 0
    finally:
        run(["ip", "link", "del", name], check=False)
        files.close()


@root_only
def test_netdev_dumps_are_asked_again_when_queues_change_on_notice_and_after_the_refresh(veth_lab):
    from lab import run
    from nettop.collectors.queue_irqs import NETDEV_REFRESH_S, map_all
    from nettop.kernel.netdev_genl import NetdevNetlink, NetdevUnsupported

    try:
        fresh_nl = NetdevNetlink()
    except (NetdevUnsupported, OSError) as exc:
        pytest.skip(f"no netdev genetlink: {exc}")
    now = [1000.0]
    host = veth_lab.host_if
    with HostReader(LIVE, clock=lambda: now[0]) as reader:
        if reader._nl is None:
            pytest.skip("no netdev genetlink")
        asked = reader._netdev_answers

        def tick() -> int:
            now[0] += 1.0
            snap = reader.read()
            fresh, _ = map_all(LIVE, list(snap.queue_maps), snap.interrupts, fresh_nl)
            assert snap.queue_maps == fresh  # kept or asked, the maps are what a fresh dump gives
            return asked.asked

        try:
            assert tick() == 2  # first tick: asked
            assert tick() == 0  # nothing changed: kept
            run(["ethtool", "-L", host, "rx", "2", "tx", "2"])  # the queue listing changes
            assert tick() == 2 and len(reader.read().queue_maps[host].queues) == 4
            assert tick() == 0
            reader.settings_changed([host])  # nettop changed it
            assert tick() == 2
            now[0] += NETDEV_REFRESH_S  # and at least every refresh period
            assert tick() == 2
        finally:
            fresh_nl.close()


def test_held_files_of_a_tree_rewritten_in_place_read_a_value_longer_than_a_page(tmp_path):
    from nettop.kernel.held_files import HeldFiles
    from nettop.kernel.sysroot import SysRoot

    (tmp_path / "proc/sys/net/core").mkdir(parents=True)
    f = tmp_path / "proc/sys/net/core/flow_limit_cpu_bitmap"
    long = ",".join(["ffffffff"] * 600)  # 5,399 bytes: past the first 4 KiB read
    f.write_text(long + "\n")
    files = HeldFiles(SysRoot(str(tmp_path), in_place=True))
    try:
        assert files.read_line("proc/sys/net/core/flow_limit_cpu_bitmap") == long
        with open(f, "r+") as w:  # rewritten in place, as the kernel regenerates it
            w.write("0" * 8)
        assert files.read_line("proc/sys/net/core/flow_limit_cpu_bitmap") == "0" * 8 + long[8:]
        assert files.held == 1
        # held and a page or longer: read again whole, in one pass with a missing file
        got = files.read_lines(["proc/sys/net/core/flow_limit_cpu_bitmap", "proc/sys/net/core/nope"])
        assert got[0] == "0" * 8 + long[8:] and isinstance(got[1], FileNotFoundError)
    finally:
        files.close()
    # a captured tree (not rewritten in place) is not held
    plain = HeldFiles(SysRoot(str(tmp_path)))
    assert plain.read_line("proc/sys/net/core/flow_limit_cpu_bitmap").startswith("00000000") and plain.held == 0


@root_only
def test_a_device_without_per_queue_ethtool_counters_is_asked_again_only_after_the_recheck(veth_lab):
    from nettop.collectors.queue_counters import RECHECK_S, QueueCounterReader
    from nettop.kernel.ethtool import Ethtool

    host = veth_lab.host_if
    idx = int(Path(f"/sys/class/net/{host}/ifindex").read_text())
    with Ethtool() as et:
        asked: list[str] = []
        real = et.stat_count

        def counting(name: str) -> int:
            asked.append(name)
            return real(name)

        et.stat_count = counting  # type: ignore[method-assign]
        reader = QueueCounterReader(None, et)
        t = 50.0
        for step, want in ((0.0, 1), (1.0, 0), (RECHECK_S - 1.5, 0), (1.0, 1), (1.0, 0)):
            t += step
            asked.clear()
            stats, problems = reader.read({host: idx}, t)
            assert stats[host].source == "none" and not problems  # veth: XDP-path counters only
            assert len(asked) == want, (step, asked)
        asked.clear()
        reader.read({host: idx})  # without a time: asked every call, as before
        assert asked == [host]
