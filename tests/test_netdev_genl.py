"""The netdev genetlink client against the running kernel: eth0 (virtio_net), a lab veth."""

from __future__ import annotations

import os
import re
import socket

import pytest

from nettop.kernel.netdev_genl import NetdevNetlink, NetdevUnsupported


def _open() -> NetdevNetlink:
    try:
        return NetdevNetlink()
    except NetdevUnsupported as exc:
        pytest.skip(str(exc))


@pytest.fixture
def nl():
    client = _open()
    yield client
    client.close()


def _sysfs_queues(ifname: str) -> set[tuple[str, int]]:
    out = set()
    for n in os.listdir(f"/sys/class/net/{ifname}/queues"):
        m = re.fullmatch(r"(rx|tx)-(\d+)", n)
        if m:
            out.add((m.group(1), int(m.group(2))))
    return out


def _msi_irqs(ifname: str) -> set[int]:
    dev = os.path.realpath(f"/sys/class/net/{ifname}/device")
    for d in (dev, os.path.dirname(dev)):
        try:
            return {int(x) for x in os.listdir(os.path.join(d, "msi_irqs"))}
        except OSError:
            continue
    return set()


def _irq_names() -> dict[int, str]:
    out = {}
    with open("/proc/interrupts") as f:
        for line in f:
            m = re.match(r"\s*(\d+):.*?\s(\S+)\s*$", line)
            if m:
                out[int(m.group(1))] = m.group(2)
    return out


def _stat(ifname: str, name: str) -> int:
    with open(f"/sys/class/net/{ifname}/statistics/{name}") as f:
        return int(f.read())


has_eth0 = pytest.mark.skipif(not os.path.exists("/sys/class/net/eth0/device"),
                              reason="no eth0 with a device here")


@has_eth0
def test_eth0_queues_are_the_ones_sysfs_lists(nl):
    ifindex = socket.if_nametoindex("eth0")
    queues = nl.queues(ifindex)
    assert {(q["type"], q["id"]) for q in queues} == _sysfs_queues("eth0")
    assert all(q["ifindex"] == ifindex for q in queues)
    # the unfiltered dump holds the same rows among those of other interfaces
    assert [q for q in nl.queues() if q["ifindex"] == ifindex] == queues


@has_eth0
def test_eth0_napis_serve_its_queues_and_any_irq_is_one_of_the_device(nl):
    ifindex = socket.if_nametoindex("eth0")
    napis = nl.napis(ifindex)
    queue_napis = {q["napi_id"] for q in nl.queues(ifindex) if "napi_id" in q}
    assert queue_napis, "eth0's driver reports no NAPI for any queue"
    assert queue_napis <= {n["id"] for n in napis}
    irq_of = {n["id"]: n["irq"] for n in napis if "irq" in n}
    for n in napis:
        assert n["ifindex"] == ifindex
        if "irq" in n:  # drivers that call netif_napi_set_irq(); virtio_net on 6.18 does not
            assert n["irq"] in _msi_irqs("eth0")
    dev = os.path.basename(os.path.realpath("/sys/class/net/eth0/device"))
    if irq_of and dev.startswith("virtio"):
        names = _irq_names()
        for q in nl.queues(ifindex):
            if q.get("napi_id") in irq_of:
                want = f"{dev}-{'input' if q['type'] == 'rx' else 'output'}.{q['id']}"
                assert names[irq_of[q["napi_id"]]] == want


@has_eth0
def test_eth0_qstats_agree_with_the_interface_counters(nl):
    ifindex = socket.if_nametoindex("eth0")
    before = _stat("eth0", "rx_packets"), _stat("eth0", "tx_packets")
    rows = nl.qstats(ifindex)
    after = _stat("eth0", "rx_packets"), _stat("eth0", "tx_packets")
    if not rows:
        pytest.skip("eth0's driver exports no per-queue stats")
    assert {(r["queue_type"], r["queue_id"]) for r in rows} <= _sysfs_queues("eth0")
    rx = sum(r.get("rx_packets", 0) for r in rows if r["queue_type"] == "rx")
    tx = sum(r.get("tx_packets", 0) for r in rows if r["queue_type"] == "tx")
    # per-queue stats count since the last reconfiguration: never more than the device's
    assert rx <= after[0] and tx <= after[1]
    driver = os.path.basename(os.path.realpath("/sys/class/net/eth0/device/driver"))
    if driver == "virtio_net":  # its stats64 is the sum of the same per-queue counters
        assert before[0] <= rx and before[1] <= tx


def test_veth_queues_have_no_napi_and_no_irq(veth_lab, nl):
    ifindex = socket.if_nametoindex(veth_lab.host_if)
    queues = nl.queues(ifindex)
    assert {(q["type"], q["id"]) for q in queues} == {(k, i) for k in ("rx", "tx") for i in range(4)}
    assert not any("napi_id" in q for q in queues)
    assert nl.napis(ifindex) == []
    for row in nl.qstats(ifindex):  # veth has no queue stats on 6.18; if a kernel adds them
        assert row["ifindex"] == ifindex and row["queue_id"] in range(4)


def test_qstats_of_all_interfaces_are_keyed_as_in_the_spec(nl):
    for row in nl.qstats():
        assert {"ifindex", "queue_type", "queue_id"} <= row.keys()
        assert row["queue_type"] in ("rx", "tx")
        assert all("-" not in k for k in row)


def test_an_operation_the_kernel_lacks_is_netdev_unsupported(nl):
    # command 200 is not in the netdev family: the kernel answers EOPNOTSUPP
    with pytest.raises(NetdevUnsupported):
        nl._dump(200, b"", {}, "no-such-op")
    # and the socket stays usable afterwards
    assert {(q["type"], q["id"]) for q in nl.queues(socket.if_nametoindex("lo"))} == _sysfs_queues("lo")


def test_one_socket_serves_many_calls_and_close_releases_it():
    client = _open()
    sock = client._sock
    for _ in range(20):
        client.queues()
        client.napis()
    assert client._sock is sock
    client.close()
    client.close()
    with pytest.raises(OSError):
        client.queues()


def test_a_vanished_ifindex_answers_nothing(nl):
    assert nl.queues(2**31 - 1) == []
