"""The kernel's ethtool monitor group names the interface whose coalescing, rings,
channels or offloads someone changed, through netlink or the old ioctl alike; nettop's
NIC settings rotation asks what it names on the next tick instead of asking every
interface on screen every tick (nettop/kernel/ethtool_nl.py, collectors/nic_rotation.py).
Real kernel, real veths."""

from __future__ import annotations

import array
import time

import pytest
from lab import run

from nettop.collectors.host import HostReader
from nettop.kernel.ethtool import Ethtool
from nettop.kernel.ethtool_nl import EthtoolMonitor
from nettop.kernel.sysroot import LIVE
from nettop.model.snapshot import setting_age
from stepped_clock import SteppedClock

ETHTOOL_SCHANNELS = 0x3D


def _monitor(**kw) -> EthtoolMonitor:  # type: ignore[no-untyped-def]
    try:
        return EthtoolMonitor(**kw)
    except OSError as exc:
        pytest.skip(f"no ethtool monitor here: {exc}")


def _set_channels_by_ioctl(ifname: str, rx: int, tx: int) -> None:
    """ETHTOOL_SCHANNELS, as tools older than ethtool netlink change them."""
    with Ethtool() as eth:
        cur = eth.channels(ifname)
        buf = array.array("I", [ETHTOOL_SCHANNELS, cur["rx-max"], cur["tx-max"], cur["other-max"],
                                cur["combined-max"], rx, tx, cur["other"], cur["combined"]])
        eth._ioctl(ifname, buf)


def test_the_monitor_names_what_another_tool_changed_by_netlink_or_ioctl_and_nothing_else(veth_lab):
    ifname = veth_lab.host_if
    mon = _monitor()
    try:
        assert mon.changed() == set()
        run(["ethtool", "-L", ifname, "rx", "2", "tx", "2"])  # ethtool netlink
        assert mon.changed() == {ifname}  # queued before the tool returned
        assert mon.changed() == set()
        _set_channels_by_ioctl(ifname, 3, 3)
        assert mon.changed() == {ifname}
        with Ethtool() as eth:
            assert eth.channels(ifname)["rx"] == 3
        run(["ethtool", "-K", ifname, "gro", "on"])
        run(["ethtool", "-K", veth_lab.host_if, "gro", "off"])
        assert mon.changed() == {ifname}
        with Ethtool() as eth:  # reading is no change
            eth.channels(ifname)
        run(["ethtool", "-k", ifname])
        assert mon.changed() == set()
    finally:
        mon.close()


def test_a_monitor_that_overflowed_says_so_and_the_reader_then_asks_every_interface(veth_lab):
    ifname = veth_lab.host_if
    mon = _monitor(rcvbuf=1)  # the kernel's smallest buffer: a few notifications fill it
    try:
        for k in range(40):
            run(["ethtool", "-K", ifname, "gro", "on" if k % 2 else "off"])
        assert mon.changed() is EthtoolMonitor.LOST
        assert mon.changed() == set()  # the gap is behind it
    finally:
        mon.close()
    with HostReader(LIVE, [ifname, "lo"], on_screen=(), clock=SteppedClock(start=100.0)) as reader:
        if reader._ethtool is None or reader._ethtool_monitor is None:
            pytest.skip("no ethtool ioctl socket or monitor")
        reader._ethtool_monitor.close()
        reader._ethtool_monitor = _monitor(rcvbuf=1)
        reader.read()
        reader.read()
        assert reader._nic_settings.asked <= 1  # rotation only
        for k in range(40):
            run(["ethtool", "-K", ifname, "gro", "on" if k % 2 else "off"])
        snap = reader.read()
        assert reader._nic_settings.asked == len(snap.devices)  # told nothing reliable: all
        assert setting_age(snap.t_mono, snap.devices[ifname].read_at) == 0.0


def test_a_monitor_overflowing_again_while_it_drains_stays_open_and_says_lost(veth_lab):
    """The kernel can fill the buffer again between our drain's reads (a storm of
    changes); the real socket cannot be timed into that, so its `pending` raises ENOBUFS
    three times in a row here, as the socket would, then drains."""
    import errno

    mon = _monitor()
    real_pending, calls = mon._sock.pending, []

    def storm():  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) <= 3:
            raise OSError(errno.ENOBUFS, "No buffer space available")
        return real_pending()

    try:
        mon._sock.pending = storm  # type: ignore[method-assign]
        assert mon.changed() is EthtoolMonitor.LOST
        assert len(calls) == 4
        run(["ethtool", "-K", veth_lab.host_if, "gro", "on"])
        assert mon.changed() == {veth_lab.host_if}  # still open, still told
    finally:
        mon.close()


def test_a_reader_with_the_monitor_shows_another_tools_change_on_the_next_tick(veth_lab):
    """Off screen too, and without asking the interface on ticks where nothing changed."""
    ifname = veth_lab.host_if
    with HostReader(LIVE, [ifname], on_screen=(), settings_period_s=60.0) as reader:
        if reader._ethtool is None or reader._ethtool_monitor is None:
            pytest.skip("no ethtool ioctl socket or monitor")
        first = reader.read()
        assert first.devices[ifname].channels["rx"] == 4
        time.sleep(0.2)
        quiet = reader.read()
        assert reader._nic_settings.asked == 0 and setting_age(quiet.t_mono, quiet.devices[ifname].read_at) > 0
        run(["ethtool", "-L", ifname, "rx", "2", "tx", "2"])
        snap = reader.read()
        assert snap.devices[ifname].channels["rx"] == 2
        assert setting_age(snap.t_mono, snap.devices[ifname].read_at) == 0.0


def _queues(snap, ifname: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    kinds = [q.kind for q in snap.devices[ifname].queues]
    return kinds.count("rx"), kinds.count("tx")


@pytest.mark.parametrize("monitor", [True, False], ids=["monitor", "no-monitor"])
def test_queue_listings_are_kept_until_the_directory_or_the_monitor_says_they_changed(veth_lab, monitor):
    """kernfs counts a directory's subdirectories in its links, so a queue added or
    removed changes the stat; a swap of rx for tx queues at the same count does not, and
    only the monitor tells it. Without a monitor the live kernel is listed every tick."""
    ifname = veth_lab.host_if
    with HostReader(LIVE, [ifname], settings_period_s=60.0) as reader:
        if reader._ethtool_monitor is None:
            pytest.skip("no ethtool monitor (Linux 5.7+)")
        if not monitor:
            reader._ethtool_monitor.close()
            reader._ethtool_monitor = None
        assert _queues(reader.read(), ifname) == (4, 4)
        listed = reader._listings.listed
        for _ in range(3):
            assert _queues(reader.read(), ifname) == (4, 4)
        assert reader._listings.listed == (listed if monitor else 0)  # without: never kept
        run(["ethtool", "-L", ifname, "rx", "3", "tx", "1"])  # fewer queues: another stat
        assert _queues(reader.read(), ifname) == (3, 1)
        run(["ethtool", "-L", ifname, "rx", "1", "tx", "3"])  # as many: the same stat
        assert _queues(reader.read(), ifname) == (1, 3)
        if monitor:
            listed = reader._listings.listed
            reader.read()
            assert reader._listings.listed == listed
