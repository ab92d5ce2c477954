"""The doctor's NIC rules on a netdevsim device under Debian's stock kernel (VM tier guest).

netdevsim takes real coalescing, ring and channel changes through ethtool netlink, so
the doctor reads them from the device and its fix lines are applied by the real Tuner
and read back with `ethtool`. What no device in a TCG guest can produce is supplied in
the later snapshot and said so where it is done: a rising rx_missed counter (netdevsim
never drops a frame) and NET_RX load concentrated on a CPU (there is no traffic).
"""

from __future__ import annotations

import dataclasses
import shlex
import time

import pytest

from nettop.actions import Journal, Tuner
from nettop.collectors.host import HostReader
from nettop.doctor import DoctorConfig, evaluate
from nettop.kernel.sysroot import LIVE
from nettop.model.snapshot import CpuTimes, Snapshot, SoftirqCounts
from nettop.model.timeline import Point
from test_netdevsim import changes, ethtool_field, nsim, sh  # noqa: F401 - the fixture


@pytest.fixture
def tuner(tmp_path):
    return Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)


def read_two(ifname: str) -> tuple[Snapshot, Snapshot]:
    with HostReader(LIVE, [ifname]) as r:
        a = r.read()
        time.sleep(0.3)
        b = r.read()
    return a, b


def findings(a: Snapshot, b: Snapshot, config: DoctorConfig = DoctorConfig()) -> dict:
    return {f.id: f for f in evaluate([Point(a, None), Point(b, None)], config)}


def apply(tuner: Tuner, line: str) -> None:
    words = shlex.split(line)
    assert words[:2] == ["nettop", "set"], line
    res = tuner.apply(tuner.plan(changes(*words[2:])), confirmed=True)
    assert all(r.verified for r in res), res


def with_missed(a: Snapshot, b: Snapshot, ifname: str, per_s: float) -> tuple[Snapshot, Snapshot]:
    """netdevsim never drops a frame: give the later snapshot a rising rx_missed."""
    def set_missed(s: Snapshot, value: int) -> Snapshot:
        assert s.tuning is not None
        nic = dataclasses.replace(s.tuning.nics[ifname], rx_missed=value)
        return dataclasses.replace(s, tuning=dataclasses.replace(s.tuning, nics={**s.tuning.nics, ifname: nic}))
    return set_missed(a, 0), set_missed(b, int(per_s * (b.t_mono - a.t_mono)))


def with_rx_load(a: Snapshot, b: Snapshot, ifname: str) -> tuple[Snapshot, Snapshot]:
    """No traffic in the guest: CPU 0 at 80 % softirq doing all NET_RX, 50k packets/s in."""
    dt = b.t_mono - a.t_mono
    cpus = {c: CpuTimes(c, 0, 0, 0, 0, 0, 0, 0, 0) for c in b.online_cpus}
    later = {c: CpuTimes(c, 0, 0, 0, 100 if c else 20, 0, 0, 80 if c == 0 else 0, 0) for c in b.online_cpus}
    sirq = {c: SoftirqCounts(c, 0, 0) for c in b.online_cpus}
    sirq_later = {c: SoftirqCounts(c, int(10_000 * dt) if c == 0 else 0, 0) for c in b.online_cpus}
    la, lb = a.links[ifname], b.links[ifname]
    lb = dataclasses.replace(lb, rx_packets=la.rx_packets + int(50_000 * dt))
    return (dataclasses.replace(a, cpu_times=cpus, softirqs=sirq),
            dataclasses.replace(b, cpu_times=later, softirqs=sirq_later, links={**b.links, ifname: lb}))


def test_coalescing_against_a_latency_target_is_named_and_resolved_by_its_fix(nsim, tuner):
    apply(tuner, f"nettop set coalesce {nsim} adaptive-rx=on rx-usecs=50")
    target = DoctorConfig(latency_target_ms=0.5)
    a, b = read_two(nsim)
    assert findings(a, b) == {} or f"coalescing:{nsim}" not in findings(a, b)
    f = findings(a, b, target)[f"coalescing:{nsim}"]
    assert f.figures == {"rx_usecs": 50.0, "adaptive_rx": 1.0}
    assert f.fix == (f"nettop set coalesce {nsim} adaptive-rx=off rx-usecs=10",)
    apply(tuner, f.fix[0])
    out = sh("ethtool", "-c", nsim)
    assert "rx-usecs: 10" in out and "Adaptive RX: off" in out
    assert f"coalescing:{nsim}" not in findings(*read_two(nsim), target)


def test_rx_ring_below_its_maximum_is_raised_to_it(nsim, tuner):
    apply(tuner, f"nettop set rings {nsim} rx=256")
    f = findings(*with_missed(*read_two(nsim), nsim, 50.0))[f"rx-ring:{nsim}"]
    assert f.figures["rx_ring"] == 256 and f.figures["rx_ring_max"] == 4096
    assert f.fix == (f"nettop set rings {nsim} rx=4096",)
    apply(tuner, f.fix[0])
    assert ethtool_field("Current", sh("ethtool", "-g", nsim), "RX") == "4096"
    after = findings(*with_missed(*read_two(nsim), nsim, 50.0))[f"rx-ring:{nsim}"]
    assert after.fix == () and after.figures["rx_ring"] == after.figures["rx_ring_max"] == 4096
    assert f"rx-ring:{nsim}" not in findings(*read_two(nsim))  # nothing missed: nothing said


def test_few_rx_queues_raises_the_channels_the_device_allows(nsim, tuner):
    apply(tuner, f"nettop set channels {nsim} combined=1")
    a, b = read_two(nsim)
    ncpus = len(b.online_cpus)
    if ncpus < 2:
        pytest.fail("the guest has one CPU: few-rx-queues needs a node with more CPUs than queues")
    f = findings(*with_rx_load(a, b, nsim))[f"few-rx-queues:{nsim}"]
    want = min(4, ncpus)
    assert f.fix == (f"nettop set channels {nsim} combined={want}",)
    apply(tuner, f.fix[0])
    assert ethtool_field("Current", sh("ethtool", "-l", nsim), "Combined") == str(want)
    assert f"few-rx-queues:{nsim}" not in findings(*with_rx_load(*read_two(nsim), nsim))
