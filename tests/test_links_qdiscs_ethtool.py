"""Interface counters, qdiscs, ethtool read-back and per-queue counters on the real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from nettop.collectors.interfaces import read_links, read_sysfs_links
from nettop.collectors.qdiscs import read_qdiscs
from nettop.collectors.queue_counters import (
    QueueCounterReader, counters_from_positions, parse_queue_stat_names,
)
from nettop.kernel.ethtool import Ethtool, EthtoolUnsupported
from nettop.kernel.rtnl import Rtnl, tc_handle, tc_parent
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data" / "ethtool"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def names(driver: str) -> list[str]:
    return (DATA / f"{driver}.txt").read_text().split("\n")[:-1]


@pytest.mark.parametrize("driver,expect", [
    ("mlx5", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("ixgbe", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("igb", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("i40e", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("ice", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("bnxt", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("ena", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("virtio_net-6.1", {("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)}),
    ("virtio_net-6.18", set()),  # per-queue packets moved to netdev qstats
    ("veth-6.18", set()),  # only XDP-path counters: not the queue's traffic
])
def test_per_queue_stat_names_of_each_driver(driver, expect):
    pos = parse_queue_stat_names(names(driver))
    assert {(k, i) for k, i, _ in pos.values()} == expect
    for k, i, f in pos.values():
        assert f in ("packets", "bytes")


def test_bnxt_casts_are_summed_and_ena_cnt_is_packets():
    bnxt = names("bnxt")
    values = list(range(1, len(bnxt) + 1))
    got = {(q.kind, q.index): q for q in counters_from_positions(parse_queue_stat_names(bnxt), values)}
    # rx queue 0: ucast+mcast+bcast packets at positions 0,1,2 → 1+2+3
    assert got[("rx", 0)].packets == 6 and got[("rx", 0)].bytes == 5 + 6 + 7
    ena = names("ena")
    vals = [0] * len(ena)
    vals[ena.index("queue_1_rx_cnt")] = 42
    got = {(q.kind, q.index): q for q in counters_from_positions(parse_queue_stat_names(ena), vals)}
    assert got[("rx", 1)].packets == 42


def test_tc_notation():
    assert tc_handle(0x80010000) == "8001:" and tc_handle(0) == "0:"
    assert tc_parent(0xFFFFFFFF) == "root" and tc_parent(0xFFFFFFF1) == "ingress"
    assert tc_parent(0x80010003) == "8001:3"


@root_only
def test_netlink_and_sysfs_agree_and_track_real_traffic(veth_lab):
    lab = veth_lab
    rtnl = Rtnl()
    try:
        quiet_nl, p1 = read_links(LIVE, rtnl)
        quiet_fs, p2 = read_sysfs_links(LIVE)
        assert not p1 and not p2
        a, b = quiet_nl[lab.host_if], quiet_fs[lab.host_if]
        for f in ("ifindex", "mtu", "txqueuelen", "operstate", "num_rx_queues", "num_tx_queues"):
            assert getattr(a, f) == getattr(b, f), f
        assert a.kind == "veth" and a.num_tx_queues == 4
        lab.iperf3_server()
        client = lab.iperf3_client(2)
        time.sleep(0.5)
        fs0, _ = read_sysfs_links(LIVE)
        nl, _ = read_links(LIVE, rtnl)
        time.sleep(0.2)
        fs1, _ = read_sysfs_links(LIVE)
        client.communicate(timeout=30)
        lo, mid, hi = fs0[lab.host_if], nl[lab.host_if], fs1[lab.host_if]
        assert lo.tx_bytes <= mid.tx_bytes <= hi.tx_bytes
        assert hi.tx_bytes > lo.tx_bytes  # traffic really flowed while reading
    finally:
        rtnl.close()


@root_only
def test_bridge_members_are_marked_so_totals_count_once(veth_lab):
    br = f"ntlbr{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", br, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", veth_lab.host_if, "master", br], check=True)
        rtnl = Rtnl()
        try:
            links, _ = read_links(LIVE, rtnl)
        finally:
            rtnl.close()
        fs, _ = read_sysfs_links(LIVE)
        for view in (links, fs):
            assert view[br].is_aggregate and view[br].kind == "bridge"
            assert view[veth_lab.host_if].master == br
    finally:
        subprocess.run(["ip", "link", "del", br], check=False)


def test_bond_in_a_captured_tree(tmp_path):
    net = tmp_path / "sys/class/net"
    for name, idx in (("bond0", 5), ("eth0", 2), ("eth1", 3)):
        d = net / name
        (d / "statistics").mkdir(parents=True)
        (d / "ifindex").write_text(f"{idx}\n")
        (d / "operstate").write_text("up\n")
        (d / "mtu").write_text("1500\n")
        for f in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped"):
            (d / "statistics" / f).write_text("100\n")
    (net / "bond0" / "bonding").mkdir()
    for m in ("eth0", "eth1"):
        (net / m / "master").symlink_to("../bond0")
    (net / "bonding_masters").write_text("bond0\n")
    links, problems = read_links(SysRoot(str(tmp_path)))
    assert set(links) == {"bond0", "eth0", "eth1"} and not problems
    assert links["bond0"].is_aggregate and links["bond0"].kind == "bond"
    assert links["eth0"].master == "bond0" and links["eth1"].master == "bond0"


@root_only
def test_mq_children_and_real_drops_match_tc(veth_lab):
    lab = veth_lab
    subprocess.run(["tc", "qdisc", "replace", "dev", lab.host_if, "root", "handle", "1:", "mq"], check=True)
    rtnl = Rtnl()
    try:
        ifnames = {l.ifindex: n for n, l in read_links(LIVE, rtnl)[0].items()}
        qd, _ = read_qdiscs(LIVE, rtnl, ifnames)
        rows = qd[lab.host_if]
        assert rows[0].kind == "mq" and rows[0].handle == "1:" and rows[0].parent == "root"
        assert sorted(r.parent for r in rows[1:]) == ["1:1", "1:2", "1:3", "1:4"]
        # a slow tbf with a tiny queue must drop under a UDP flood
        subprocess.run(["tc", "qdisc", "replace", "dev", lab.host_if, "root", "handle", "2:", "tbf",
                        "rate", "1mbit", "burst", "4k", "limit", "4k"], check=True)
        lab.spawn(["iperf3", "-s", "-1", "-B", lab.peer_ip], in_ns=True)
        time.sleep(0.3)
        lab.iperf3_client(2, extra=["-u", "-b", "50M"]).communicate(timeout=30)
        time.sleep(0.5)  # let the tbf drain its last packets
        qd, _ = read_qdiscs(LIVE, rtnl, ifnames)
        tc = json.loads(subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", lab.host_if],
                                       capture_output=True, text=True, check=True).stdout)
    finally:
        rtnl.close()
    tbf = qd[lab.host_if][0]
    assert tbf.kind == "tbf" and tbf.handle == "2:"
    assert tbf.drops > 100
    tc_root = next(q for q in tc if q.get("root"))
    assert tbf.drops == tc_root["drops"] and tbf.packets == tc_root["packets"]


def _ethtool_cli(*args: str) -> str:
    return subprocess.run(["ethtool", *args], capture_output=True, text=True, check=True).stdout


def _eth0_is_virtio() -> bool:
    return os.path.realpath("/sys/class/net/eth0/device/driver").endswith("virtio_net")


@pytest.mark.skipif(not _eth0_is_virtio(), reason="eth0 is not virtio_net here")
def test_ethtool_ioctl_reads_eth0_as_the_ethtool_cli_does():
    with Ethtool() as et:
        info = et.drvinfo("eth0")
        co = et.coalesce("eth0")
        rings = et.rings("eth0")
        ch = et.channels("eth0")
    cli = dict(l.split(": ", 1) for l in _ethtool_cli("-i", "eth0").splitlines() if ": " in l)
    assert info["driver"] == cli["driver"] == "virtio_net"
    assert info["bus_info"] == cli["bus-info"]
    c = _ethtool_cli("-c", "eth0")
    assert f"rx-frames: {co['rx-frames']}" in c and f"tx-frames: {co['tx-frames']}" in c
    g = _ethtool_cli("-g", "eth0").split("Current hardware settings:")
    assert f"RX:\t\t{rings['rx']}" in g[1] and f"RX:\t\t{rings['rx-max']}" in g[0]
    assert f"Combined:\t{ch['combined']}" in _ethtool_cli("-l", "eth0")


@root_only
def test_veth_has_no_coalescing_but_has_channels(veth_lab):
    with Ethtool() as et:
        with pytest.raises(EthtoolUnsupported):
            et.coalesce(veth_lab.host_if)
        ch = et.channels(veth_lab.host_if)
    assert ch["rx"] == 4 and ch["tx"] == 4


@pytest.mark.skipif(not _eth0_is_virtio(), reason="eth0 is not virtio_net here")
def test_eth0_per_queue_counters_come_from_netdev_qstats_and_add_up():
    from nettop.kernel.netdev_genl import NetdevNetlink

    with NetdevNetlink() as nl, Ethtool() as et:
        reader = QueueCounterReader(nl, et)
        idx = int(Path("/sys/class/net/eth0/ifindex").read_text())
        before = int(Path("/sys/class/net/eth0/statistics/rx_packets").read_text())
        stats, problems = reader.read({"eth0": idx})
        after = int(Path("/sys/class/net/eth0/statistics/rx_packets").read_text())
    q = stats["eth0"]
    assert q.source == "netdev-qstats" and not problems
    rx = sum(c.packets or 0 for c in q.queues if c.kind == "rx")
    assert before <= rx <= after


def test_a_captured_link_counts_its_rx_and_tx_queues_apart(tmp_path):
    """GIVEN a NIC with 4 rx and 2 tx queues (tx channels set lower), then 3 and 3 THEN each
    tick's link shows that tick's counts (counted once per listing, not per tick)."""
    d = tmp_path / "sys/class/net/eth0"
    for q in ("rx-0", "rx-1", "rx-2", "rx-3", "tx-0", "tx-1"):
        (d / "queues" / q).mkdir(parents=True)
    (d / "ifindex").write_text("2\n")
    (d / "statistics").mkdir()
    for f in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets"):
        (d / "statistics" / f).write_text("1\n")
    links, _ = read_sysfs_links(SysRoot(str(tmp_path)))
    assert (links["eth0"].num_rx_queues, links["eth0"].num_tx_queues) == (4, 2)
    (d / "queues/rx-3").rmdir()
    (d / "queues/tx-2").mkdir()
    links, _ = read_sysfs_links(SysRoot(str(tmp_path)))
    assert (links["eth0"].num_rx_queues, links["eth0"].num_tx_queues) == (3, 3)
