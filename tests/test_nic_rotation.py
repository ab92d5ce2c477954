"""Coalescing, rings and channels: asked when the kernel's ethtool monitor says they
changed (every tick on screen where there is no monitor), in rotation besides, at once
after nettop's own changes, and never claimed newer than they are
(nettop/collectors/nic_rotation.py). Each ethtool request takes RTNL, so the number asked
per tick is the figure that matters; the real kernel's veths count it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

import pytest
from lab import can_build_lab, run, veth_lab

from nettop.collectors.host import HostReader
from nettop.collectors.nic_rotation import NicSettingsRotation
from nettop.kernel.ethtool import Ethtool
from nettop.kernel.ethtool_nl import EthtoolNetlink
from nettop.kernel.sysroot import LIVE
from nettop.model.problems import Problem
from nettop.model.rates import compute_rates
from nettop.model.snapshot import setting_age
from nettop.output.snapshot_json import build_document
from stepped_clock import SteppedClock


def _counting_reader() -> tuple[list[str], Callable[[str], tuple[dict[str, int], None, None, list[Problem]]]]:
    """(the interfaces asked, in order; a `read_one` that records them and answers a
    coalescing value that changes with every ask)."""
    asked: list[str] = []

    def read_one(name: str) -> tuple[dict[str, int], None, None, list[Problem]]:
        asked.append(name)
        return {"rx-usecs": len(asked)}, None, None, []
    return asked, read_one


def test_rotation_asks_new_and_on_screen_every_tick_the_rest_within_the_period_and_forgets_the_gone():
    asked, read_one = _counting_reader()
    rot = NicSettingsRotation(period_s=10.0)
    links = {f"v{i}": i for i in range(20)}
    got = rot.read(1.0, links, {"v0"}.__contains__, read_one)
    assert sorted(asked) == sorted(links) and {r.read_at for r in got.values()} == {1.0}
    last_read = {n: 1.0 for n in links}
    for tick in range(2, 40):
        asked.clear()
        got = rot.read(float(tick), links, {"v0"}.__contains__, read_one)
        assert asked[0] == "v0" or "v0" in asked
        assert len(asked) <= 1 + 2  # 19 in rotation over 10 ticks: 2 a tick
        for n in asked:
            last_read[n] = float(tick)
        for n, r in got.items():
            assert r.read_at == last_read[n] and tick - r.read_at <= 10.0
    # nettop changed v7: asked on the next tick; v3 went and v5 was re-created: forgotten
    rot.notice(["v7"])
    del links["v3"]
    links["v5"] = 99
    asked.clear()
    got = rot.read(40.0, links, {"v0"}.__contains__, read_one)
    assert {"v0", "v7", "v5"} <= set(asked) and got["v7"].read_at == got["v5"].read_at == 40.0
    assert "v3" not in got and len(rot._last) == len(links)


def test_the_rotation_asks_what_the_monitor_names_on_screen_or_not_and_the_rest_in_turn():
    """With the kernel's ethtool monitor (`changed`): what it names, on screen or not, and
    every interface within the period; all when it lost some; without it (None) the
    interfaces on screen every tick."""
    asked, read_one = _counting_reader()
    rot = NicSettingsRotation(period_s=10.0)
    links = {f"v{i}": i for i in range(20)}
    on_screen = {"v0", "v1"}.__contains__
    rot.read(1.0, links, on_screen, read_one, changed=set())
    assert sorted(asked) == sorted(links)  # the first tick asks all
    seen = {n: 1.0 for n in links}
    for tick in range(2, 30):
        asked.clear()
        changed = {"v9"} if tick == 5 else {"v1", "gone"} if tick == 7 else set()
        got = rot.read(float(tick), links, on_screen, read_one, changed=changed)
        assert set(changed) & set(links) <= set(asked)
        assert len(asked) <= 2 + len(changed)  # 20 in rotation over 10 ticks, plus what changed
        for n in asked:
            seen[n] = float(tick)
        assert all(got[n].read_at == seen[n] and tick - seen[n] <= 10.0 for n in links)
    asked.clear()
    rot.read(30.0, links, on_screen, read_one, changed=set(links))  # the monitor lost some
    assert sorted(asked) == sorted(links)
    asked.clear()
    rot.read(31.0, links, on_screen, read_one)  # no monitor: on screen every tick
    assert {"v0", "v1"} <= set(asked)


def _channels(reader: HostReader, ifname: str) -> tuple[int | None, float, float]:
    snap = reader.read()
    dev = snap.devices[ifname]
    return (dev.channels or {}).get("rx"), setting_age(snap.t_mono, dev.read_at), snap.t_mono


def _seen_off_screen(read, want, t_change: float, period: float) -> float | None:
    """Seconds after `t_change` until the off-screen reader's value is `want`, its age
    then saying it was read after the change; an older value is never claimed newer."""
    while time.monotonic() - t_change < period + 1.0:
        value, age, t = read()
        if value == want:
            assert t - age > t_change
            return time.monotonic() - t_change
        assert t - age <= t_change  # an old value is never claimed to be newer
        time.sleep(0.1)
    return None


def test_ethtool_L_by_another_tool_shows_next_tick_on_screen_and_within_the_period_off_it(veth_lab):
    ifname = veth_lab.host_if
    period = 2.0
    with HostReader(LIVE, [ifname], settings_period_s=period) as on, \
            HostReader(LIVE, [ifname], on_screen=(), settings_period_s=period) as off:
        if on._ethtool is None:
            pytest.skip("no ethtool ioctl socket")
        assert _channels(on, ifname)[0] == 4 and _channels(off, ifname)[0] == 4
        time.sleep(0.3)
        a = off.read()
        time.sleep(0.3)
        b = off.read()
        age = setting_age(b.t_mono, b.devices[ifname].read_at)
        assert age > 0.5  # off screen: kept, and it says how old, also in the JSON
        assert build_document(a, b, compute_rates(a, b))["interfaces"][ifname]["nic_settings_age_s"] == \
            pytest.approx(age, abs=0.001)
        run(["ethtool", "-L", ifname, "rx", "2", "tx", "2"])
        t_change = time.monotonic()
        assert _channels(on, ifname)[:2] == (2, 0.0)
        seen = _seen_off_screen(lambda: _channels(off, ifname), 2, t_change, period)
        assert seen is not None and seen <= period + 0.5, seen
        # nettop's own change (the journal names the interface): the next tick, off screen
        run(["ethtool", "-L", ifname, "rx", "3", "tx", "3"])
        off.settings_changed(ifnames=[ifname])
        assert _channels(off, ifname)[:2] == (3, 0.0)


N = 8


def _count_ethtool_requests(monkeypatch) -> list[str]:
    """The interfaces named by each ethtool request nettop makes (3 ioctls and the
    offloads' netlink request per interface asked)."""
    calls: list[str] = []
    for cls, what in ((Ethtool, "coalesce"), (Ethtool, "rings"), (Ethtool, "channels"),
                      (EthtoolNetlink, "get_features")):
        real = getattr(cls, what)

        def counted(self, ifname, _real=real):  # type: ignore[no-untyped-def]
            calls.append(ifname)
            return _real(self, ifname)
        monkeypatch.setattr(cls, what, counted)
    return calls


@pytest.mark.parametrize("monitor", [True, False], ids=["monitor", "no-monitor"])
def test_ethtool_requests_per_tick_drop_to_the_changed_or_on_screen_set_plus_the_budget(monkeypatch, monitor):
    """With the kernel's ethtool monitor only what it names (and the rotation) is asked,
    on screen or not, and a change by another tool is asked on the next tick; without
    one (a kernel before 5.7) the interfaces on screen are asked every tick."""
    reason = can_build_lab()
    if reason:
        pytest.skip(reason)
    calls = _count_ethtool_requests(monkeypatch)
    with contextlib.ExitStack() as stack:
        labs = [stack.enter_context(veth_lab(queues=2)) for _ in range(N)]
        names = [lab.host_if for lab in labs]
        with HostReader(LIVE, names, on_screen=names[:1], settings_period_s=10.0,
                        clock=SteppedClock(start=1000.0)) as reader:
            if reader._ethtool is None:
                pytest.skip("no ethtool ioctl socket")
            if monitor and reader._ethtool_monitor is None:
                pytest.skip("no ethtool monitor (Linux 5.7+)")
            if not monitor:
                reader._ethtool_monitor.close()
                reader._ethtool_monitor = None
            reader.read()
            assert len(calls) == 4 * N  # the first tick asks every interface (3 ioctls, the offloads)
            per_tick, asked = [], set()
            for tick in range(10):
                if tick == 4:  # another tool changes an interface that is not on screen
                    run(["ethtool", "-K", names[5], "gro", "on"])
                calls.clear()
                snap = reader.read()
                per_tick.append(len(calls))
                asked.update(calls)
                if tick == 4 and monitor:
                    assert names[5] in calls and snap.tuning.nics[names[5]].features["gro"] is True
                    assert setting_age(snap.t_mono, snap.devices[names[5]].read_at) == 0.0
                assert all(setting_age(snap.t_mono, snap.devices[n].read_at) <= 10.0 for n in names)
                assert all(snap.devices[n].channels is not None for n in names)
                assert all(snap.tuning.nics[n].features for n in names)  # kept between asks
            assert asked == set(names)  # each re-asked within the period
            if monitor:  # 8 in rotation over 10 ticks (one a tick, sometimes none), the changed one
                assert max(per_tick) <= 4 * 2 and per_tick.count(0) >= 1, per_tick
            else:  # the on-screen interface every tick and 7 in rotation over 10 ticks
                assert max(per_tick) <= 4 * (1 + 1) and min(per_tick) >= 4, per_tick


def _gro(reader: HostReader, ifname: str) -> tuple[bool | None, float, float]:
    snap = reader.read()
    feats = snap.tuning.nics[ifname].features or {}
    return feats.get("gro"), setting_age(snap.t_mono, snap.devices[ifname].read_at), snap.t_mono


def test_offloads_changed_by_ethtool_K_show_next_tick_on_screen_and_within_the_period_off_it(veth_lab):
    """The offloads ride with the NIC settings (one RTNL request each): asked every tick on
    screen, in rotation off it, at once after nettop's own change; their age is the
    NIC settings' `read_at`."""
    ifname = veth_lab.host_if
    period = 2.0
    run(["ethtool", "-K", ifname, "gro", "on"])
    with HostReader(LIVE, [ifname], settings_period_s=period) as on, \
            HostReader(LIVE, [ifname], on_screen=(), settings_period_s=period) as off:
        if on._ethtool is None or on._tuning._nl is None:
            pytest.skip("no ethtool ioctl or netlink socket")
        assert _gro(on, ifname)[0] is True and _gro(off, ifname)[0] is True
        run(["ethtool", "-K", ifname, "gro", "off"])
        t_change = time.monotonic()
        assert _gro(on, ifname)[:2] == (False, 0.0)
        seen = _seen_off_screen(lambda: _gro(off, ifname), False, t_change, period)
        assert seen is not None and seen <= period + 0.5, seen
        run(["ethtool", "-K", ifname, "gro", "on"])
        off.settings_changed(ifnames=[ifname])  # nettop's own change: the next tick, off screen
        assert _gro(off, ifname)[:2] == (True, 0.0)
