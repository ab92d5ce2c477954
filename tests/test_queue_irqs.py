"""Queue → IRQ maps per driver naming, on captured /proc/interrupts and sysfs trees built
like the kernel's (relative symlinks), and live on eth0 and a lab veth."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from nettop.collectors.interrupts import parse_interrupts, read_interrupts
from nettop.collectors.queue_irqs import DeviceIrqs, map_all, map_queues, read_device
from nettop.model.snapshot import QueueIrqs
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data" / "interrupts"


def make_host(tmp: Path, interrupts: str, nics: list[dict]) -> SysRoot:
    """A root with proc/interrupts and, per NIC, sys/devices/... + sys/class/net links.

    nic: ifname, bdf (PCI function), virtio ("virtio2": netdev sits on it), msi (IRQs or
    None for no msi_irqs dir), queues (count of rx and tx queues).
    """
    (tmp / "proc").mkdir(exist_ok=True)
    (tmp / "proc" / "interrupts").write_text(interrupts)
    (tmp / "sys" / "class" / "net").mkdir(parents=True, exist_ok=True)
    for nic in nics:
        pci = tmp / "sys" / "devices" / "pci0000:00" / nic["bdf"]
        dev = pci / nic["virtio"] if nic.get("virtio") else pci
        netdir = dev / "net" / nic["ifname"]
        for q in range(nic.get("queues", 1)):
            (netdir / "queues" / f"rx-{q}").mkdir(parents=True)
            (netdir / "queues" / f"tx-{q}").mkdir(parents=True)
        (netdir / "ifindex").write_text("7\n")
        # like the kernel: net/IF/device -> ../../../<dev>, class/net/IF -> ../../devices/...
        os.symlink(f"../../../{dev.name}", netdir / "device")
        os.symlink(os.path.relpath(netdir, tmp / "sys" / "class" / "net"),
                   tmp / "sys" / "class" / "net" / nic["ifname"])
        if nic.get("msi") is not None:
            (pci / "msi_irqs").mkdir(exist_ok=True)
            for irq in nic["msi"]:
                (pci / "msi_irqs" / str(irq)).write_text("msix\n")
    return SysRoot(str(tmp))


def qmap(root: SysRoot, ifname: str):
    table, problems = read_interrupts(root)
    assert problems == []
    m, problems = map_queues(root, ifname, table, None)
    assert problems == []
    return m


def rows(m) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(q.kind, q.index): q.irqs for q in m.queues}


# --- one test per driver naming --------------------------------------------------------


@pytest.mark.parametrize("with_msi", [True, False])
def test_mlx5_completion_vectors_of_its_own_pci_function(tmp_path, with_msi):
    root = make_host(tmp_path, (DATA / "mlx5.Q6700.txt").read_text(), [
        {"ifname": "ens1f0", "bdf": "0000:01:00.0", "queues": 4,
         "msi": list(range(27, 34)) if with_msi else None},
    ])
    m = qmap(root, "ens1f0")
    assert rows(m) == {("combined", i): (30 + i,) for i in range(4)}
    assert m.other_irqs == (27, 28, 29)  # pages, cmd and async EQs; not 0000:01:00.1's
    assert m.source == "driver-naming"


def test_mlx5_vectors_beyond_the_configured_channels_serve_no_queue(tmp_path):
    root = make_host(tmp_path, (DATA / "mlx5.Q6700.txt").read_text(), [
        {"ifname": "ens1f0", "bdf": "0000:01:00.0", "queues": 2, "msi": list(range(27, 34))},
    ])
    m = qmap(root, "ens1f0")
    assert rows(m) == {("combined", 0): (30,), ("combined", 1): (31,)}
    assert m.other_irqs == (27, 28, 29, 32, 33)


def test_ixgbe_txrx_from_a_capture_alone(tmp_path):
    # no sysfs at all: only the names in /proc/interrupts
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "interrupts").write_text((DATA / "ixgbe.E5645.txt").read_text())
    m = qmap(SysRoot(str(tmp_path)), "eth0")
    assert rows(m) == {("combined", i): (66 + i,) for i in range(8)}
    assert m.other_irqs == (65,)  # the link IRQ named after the interface


def test_igb_separate_rx_and_tx_vectors(tmp_path):
    root = make_host(tmp_path, (DATA / "igb.E5606.txt").read_text(), [
        {"ifname": "eth1", "bdf": "0000:02:00.1", "queues": 4, "msi": list(range(66, 75))},
    ])
    m = qmap(root, "eth1")
    assert rows(m) == {**{("rx", i): (67 + i,) for i in range(4)},
                       **{("tx", i): (71 + i,) for i in range(4)}}
    assert m.other_irqs == (66,)


def test_igb_paired_txrx_does_not_take_eth10s_vectors(tmp_path):
    text = (DATA / "strange-cpu.txt").read_text()
    extra = "".join(f"{70 + i:3d}:" + "          1" * 8 + f"   PCI-MSI-edge      eth10-TxRx-{i}\n"
                    for i in range(2))
    text = text.replace("ERR:", extra + "ERR:")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "interrupts").write_text(text)
    m = qmap(SysRoot(str(tmp_path)), "eth1")
    assert rows(m) == {("combined", i): (61 + i,) for i in range(8)}
    m10 = qmap(SysRoot(str(tmp_path)), "eth10")
    assert rows(m10) == {("combined", 0): (70,), ("combined", 1): (71,)}


def test_i40e_queue_vectors_and_its_misc_and_flow_director_vectors(tmp_path):
    root = make_host(tmp_path, (DATA / "1xE3-1271.I217_and_X710.L2_mixed.masterconf.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:01:00.0", "queues": 4, "msi": None},
    ])
    m = qmap(root, "eth0")
    assert rows(m) == {("combined", i): (33 + i,) for i in range(4)}
    assert m.other_irqs == (32, 37)  # i40e-0000:01:00.0:misc, :fdir-TxRx-0


def _new_kernel(lines: list[tuple[int, str, str]]) -> str:
    """/proc/interrupts as Linux 6.x prints it for 4 CPUs: %*d: then ' %10u' per CPU."""
    out = ["           CPU0       CPU1       CPU2       CPU3       "]
    for irq, chip, name in lines:
        counts = "".join(f" {(irq * 7919 + c) % 100000:10d}" for c in range(4))
        out.append(f"{irq:3d}:{counts} {chip:>8s} {irq - 100:3d}-edge      {name}")
    return "\n".join(out) + "\nNMI:          0          0          0          0   Non-maskable interrupts\n"


def test_ice_names_carry_the_driver_prefix(tmp_path):
    bdf = "0000:3b:00.0"
    text = _new_kernel([(140, f"PCI-MSIX-{bdf}", f"ice-{bdf}:misc")]
                       + [(141 + i, f"PCI-MSIX-{bdf}", f"ice-ens785f0-TxRx-{i}") for i in range(4)])
    root = make_host(tmp_path, text, [{"ifname": "ens785f0", "bdf": bdf, "queues": 4, "msi": None}])
    m = qmap(root, "ens785f0")
    assert rows(m) == {("combined", i): (141 + i,) for i in range(4)}
    assert m.other_irqs == (140,)


def test_bnxt_txrx_and_the_chip_column_names_the_device(tmp_path):
    bdf = "0000:41:00.0"
    text = _new_kernel([(150 + i, f"PCI-MSIX-{bdf}", f"enp65s0f0np0-TxRx-{i}") for i in range(3)]
                       + [(160, f"PCI-MSIX-{bdf}", "bnxt_fw_reset")])  # an IRQ found by its chip
    root = make_host(tmp_path, text, [{"ifname": "enp65s0f0np0", "bdf": bdf, "queues": 3, "msi": None}])
    m = qmap(root, "enp65s0f0np0")
    assert rows(m) == {("combined", i): (150 + i,) for i in range(3)}
    assert m.other_irqs == (160,)


@pytest.mark.parametrize("io_name", ["eth0-Tx-Rx-{}", "ena-io-{}"])
def test_ena_io_vectors_and_management_vector(tmp_path, io_name):
    bdf = "0000:00:05.0"
    text = _new_kernel([(24, f"PCI-MSIX-{bdf}", f"ena-mgmnt@pci:{bdf}")]
                       + [(25 + i, f"PCI-MSIX-{bdf}", io_name.format(i)) for i in range(2)])
    root = make_host(tmp_path, text, [{"ifname": "eth0", "bdf": bdf, "queues": 2, "msi": [24, 25, 26]}])
    m = qmap(root, "eth0")
    assert rows(m) == {("combined", 0): (25,), ("combined", 1): (26,)}
    assert m.other_irqs == (24,)


def test_virtio_input_output_of_the_netdevs_own_virtio_device(tmp_path):
    root = make_host(tmp_path, (DATA / "nettop-vm-6.18-virtio.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:00:03.0", "virtio": "virtio2", "msi": [37, 38, 39]},
    ])
    m = qmap(root, "eth0")
    assert rows(m) == {("rx", 0): (38,), ("tx", 0): (39,)}
    assert m.other_irqs == (37,)


def test_virtio_without_msi_irqs_on_an_old_kernel(tmp_path):
    root = make_host(tmp_path, (DATA / "vscale-vm.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:00:03.0", "virtio": "virtio0", "msi": None},
    ])
    m = qmap(root, "eth0")
    assert rows(m) == {("rx", 0): (27,), ("tx", 0): (28,)}
    assert m.other_irqs == (26,)  # virtio0-config, not virtio1's or virtio2's


def test_virtio_with_one_shared_vector_serves_every_queue(tmp_path):
    root = make_host(tmp_path, (DATA / "kvm.l3.masterconf.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:00:03.0", "virtio": "virtio0", "queues": 2, "msi": None},
    ])
    m = qmap(root, "eth0")
    assert rows(m) == {(k, i): (25,) for k in ("rx", "tx") for i in range(2)}
    assert m.other_irqs == (24,)


def test_qlogic_tx_vector_shared_with_an_rx_queue(tmp_path):
    root = make_host(tmp_path, (DATA / "2xE5-2687W.2xQLogic.L3_manual.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:03:00.0", "queues": 4, "msi": None},
    ])
    m = qmap(root, "eth0")
    assert rows(m) == {("rx", 0): (88,), ("rx", 1): (89,), ("rx", 2): (90,), ("rx", 3): (91,),
                       ("tx", 0): (91,), ("tx", 1): (), ("tx", 2): (), ("tx", 3): ()}


def test_bnx2_numbered_vectors_and_mlx4_on_the_same_host(tmp_path):
    root = make_host(tmp_path, (DATA / "2xX5650.BCM5709_and_MT27520.L2.manual.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:01:00.0", "queues": 8, "msi": None},
        {"ifname": "eth2", "bdf": "0000:07:00.0", "queues": 3, "msi": None},
    ])
    assert rows(qmap(root, "eth0")) == {("combined", i): (77 + i,) for i in range(8)}
    # eth2-N are mlx4_en's own names; the mlx4 core comp vectors of the bdf are matched too
    eth2 = qmap(root, "eth2")
    assert rows(eth2) == {("combined", i): (60 + i, 64 + i) for i in range(3)}
    assert eth2.other_irqs == (63, 67, 68, 69, 70, 71)


def test_single_vector_nic_serves_all_its_queues(tmp_path):
    root = make_host(tmp_path, (DATA / "1xE5200.82571EB_and_AR8121.L2.manual.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:02:00.0", "queues": 1, "msi": None},
    ])
    m = qmap(root, "eth0")
    assert rows(m) == {("rx", 0): (27,), ("tx", 0): (27,)}


def test_software_device_has_queues_and_no_irqs(tmp_path):
    root = make_host(tmp_path, (DATA / "igb.E5606.txt").read_text(), [])
    for q in range(2):
        (tmp_path / "sys" / "class" / "net" / "veth0" / "queues" / f"rx-{q}").mkdir(parents=True)
        (tmp_path / "sys" / "class" / "net" / "veth0" / "queues" / f"tx-{q}").mkdir(parents=True)
    m = qmap(root, "veth0")
    assert m.queues == tuple(QueueIrqs(k, i) for k in ("rx", "tx") for i in range(2))
    assert m.source == "none" and m.other_irqs == ()


def test_map_all_maps_each_interface_and_reports_no_problem(tmp_path):
    root = make_host(tmp_path, (DATA / "igb.E5606.txt").read_text(), [
        {"ifname": "eth0", "bdf": "0000:02:00.0", "queues": 4, "msi": list(range(57, 66))},
        {"ifname": "eth1", "bdf": "0000:02:00.1", "queues": 4, "msi": list(range(66, 75))},
    ])
    table, _ = read_interrupts(root)
    maps, problems = map_all(root, ["eth0", "eth1"], table, None)
    assert problems == []
    assert rows(maps["eth0"])[("rx", 0)] == (58,) and rows(maps["eth1"])[("tx", 3)] == (74,)


def test_names_are_found_even_when_counts_were_not_parsed():
    table, _ = parse_interrupts((DATA / "ixgbe.E5645.txt").read_text(), lambda irq, name: False)
    m, _ = map_queues(SysRoot("/nonexistent-root"), "eth1", table, None)
    assert rows(m) == {("combined", i): (75 + i,) for i in range(8)}


# --- the live kernel -------------------------------------------------------------------


def _live_virtio_irqs() -> dict[str, int]:
    found = {}
    with open("/proc/interrupts") as f:
        for line in f:
            m = re.match(r"\s*(\d+):.*\s(virtio\d+-(?:input|output)\.\d+)\s*$", line)
            if m:
                found[m.group(2)] = int(m.group(1))
    return found


def _eth0_virtio() -> str | None:
    try:
        drv = os.path.basename(os.path.realpath("/sys/class/net/eth0/device/driver"))
    except OSError:
        return None
    if drv != "virtio_net":
        return None
    return os.path.basename(os.path.realpath("/sys/class/net/eth0/device"))


def _netdev():
    from nettop.kernel.netdev_genl import NetdevNetlink, NetdevUnsupported
    try:
        return NetdevNetlink()
    except NetdevUnsupported:
        return None


@pytest.mark.skipif(_eth0_virtio() is None, reason="eth0 is not virtio_net here")
@pytest.mark.parametrize("use_netlink", [False, True])
def test_live_eth0_input_and_output_irqs_map_to_rx0_and_tx0(use_netlink):
    dev = _eth0_virtio()
    names = _live_virtio_irqs()
    nl = _netdev() if use_netlink else None
    try:
        table, _ = read_interrupts(LIVE)
        m, problems = map_queues(LIVE, "eth0", table, nl)
    finally:
        if nl is not None:
            nl.close()
    assert problems == []
    got = rows(m)
    assert got[("rx", 0)] == (names[f"{dev}-input.0"],)
    assert got[("tx", 0)] == (names[f"{dev}-output.0"],)
    config = [i for i, q in table.irqs.items() if q.name == f"{dev}-config"]
    assert set(config) <= set(m.other_irqs)
    if nl is not None:
        # virtio_net reports the rx NAPI but not its IRQ: names decide, netlink adds napi ids
        napi = {q["id"]: q.get("napi_id") for q in _netdev().queues(socket.if_nametoindex("eth0"))
                if q["type"] == "rx"}
        assert next(q for q in m.queues if (q.kind, q.index) == ("rx", 0)).napi_id == napi[0]


def test_live_veth_queues_have_no_irqs(veth_lab):
    nl = _netdev()
    try:
        table, _ = read_interrupts(LIVE)
        maps, problems = map_all(LIVE, [veth_lab.host_if, "lo"], table, nl)
    finally:
        if nl is not None:
            nl.close()
    assert problems == []
    m = maps[veth_lab.host_if]
    assert m.queues == tuple(QueueIrqs(k, i) for k in ("rx", "tx") for i in range(4))
    assert m.source == "none" and m.other_irqs == ()


# --- netlink answers (dicts shaped as NetdevNetlink returns them) -----------------------


def test_netlink_queue_napi_irq_chain_wins_and_pairs_become_combined(tmp_path):
    from nettop.collectors.queue_irqs import map_by_names, map_by_netlink, read_device, read_queue_dirs

    root = make_host(tmp_path, (DATA / "mlx5.Q6700.txt").read_text(), [
        {"ifname": "ens1f0", "bdf": "0000:01:00.0", "queues": 2, "msi": list(range(27, 34))},
    ])
    table, _ = read_interrupts(root)
    named = map_by_names("ens1f0", table, read_device(root, "ens1f0"), read_queue_dirs(root, "ens1f0"))
    # the kernel says: channel i has one NAPI (id 8193+i) for rx-i and tx-i, on IRQ 31-i
    queues = [{"id": i, "type": t, "ifindex": 7, "napi_id": 8193 + i} for i in range(2) for t in ("rx", "tx")]
    napis = [{"id": 8193 + i, "ifindex": 7, "irq": 31 - i, "defer_hard_irqs": 0} for i in range(2)]
    m = map_by_netlink("ens1f0", queues, napis, named)
    assert m.source == "netdev-netlink"
    assert m.queues == (QueueIrqs("combined", 0, (31,), 8193), QueueIrqs("combined", 1, (30,), 8194))
    assert m.other_irqs == (27, 28, 29, 32, 33)


def test_netlink_without_any_irq_leaves_it_to_naming_and_a_queue_without_irq_keeps_its_name(tmp_path):
    from nettop.collectors.queue_irqs import map_by_names, map_by_netlink, read_device, read_queue_dirs

    root = make_host(tmp_path, (DATA / "igb.E5606.txt").read_text(), [
        {"ifname": "eth1", "bdf": "0000:02:00.1", "queues": 4, "msi": list(range(66, 75))},
    ])
    table, _ = read_interrupts(root)
    named = map_by_names("eth1", table, read_device(root, "eth1"), read_queue_dirs(root, "eth1"))
    rx_only = [{"id": i, "type": "rx", "ifindex": 7, "napi_id": 100 + i} for i in range(4)]
    assert map_by_netlink("eth1", rx_only, [{"id": 100 + i, "ifindex": 7} for i in range(4)], named) is None
    tx = [{"id": i, "type": "tx", "ifindex": 7} for i in range(4)]
    m = map_by_netlink("eth1", rx_only + tx, [{"id": 100 + i, "ifindex": 7, "irq": 67 + i} for i in range(4)], named)
    assert {(q.kind, q.index): (q.irqs, q.napi_id) for q in m.queues} == {
        **{("rx", i): ((67 + i,), 100 + i) for i in range(4)},
        **{("tx", i): ((71 + i,), None) for i in range(4)},
    }
    assert m.other_irqs == (66,)


def test_a_vector_renamed_on_the_same_number_changes_the_remembered_map(tmp_path):
    """GIVEN a map worked out once (and remembered, keyed by its inputs) WHEN the driver
    renames two of its vectors on the same IRQ numbers (the same msi_irqs) THEN the next
    map follows the new names, not the remembered one."""
    text = (DATA / "mlx5.Q6700.txt").read_text()
    root = make_host(tmp_path, text, [
        {"ifname": "ens1f0", "bdf": "0000:01:00.0", "queues": 4, "msi": list(range(27, 34))},
    ])
    assert rows(qmap(root, "ens1f0")) == {("combined", i): (30 + i,) for i in range(4)}
    swapped = text.replace("mlx5_comp0@pci:0000:01:00.0", "mlx5_compX").replace(
        "mlx5_comp1@pci:0000:01:00.0", "mlx5_comp0@pci:0000:01:00.0").replace(
        "mlx5_compX", "mlx5_comp1@pci:0000:01:00.0")
    (tmp_path / "proc" / "interrupts").write_text(swapped)
    assert rows(qmap(root, "ens1f0")) == {("combined", 0): (31,), ("combined", 1): (30,),
                                          ("combined", 2): (32,), ("combined", 3): (33,)}


def test_a_device_link_moved_or_msi_vectors_changed_show_on_the_next_read(tmp_path):
    """GIVEN an interface's device read once (its path resolved and remembered by its links'
    targets) WHEN a vector is added to msi_irqs, then the interface's device link points
    to another PCI function THEN each next read_device shows it."""
    root = make_host(tmp_path, (DATA / "mlx5.Q6700.txt").read_text(), [
        {"ifname": "ens1f0", "bdf": "0000:01:00.0", "queues": 4, "msi": [27, 28]},
    ])
    assert read_device(root, "ens1f0") == DeviceIrqs("0000:01:00.0", None, frozenset({27, 28}))
    pci = tmp_path / "sys/devices/pci0000:00"
    (pci / "0000:01:00.0/msi_irqs/29").write_text("msix\n")
    assert read_device(root, "ens1f0") == DeviceIrqs("0000:01:00.0", None, frozenset({27, 28, 29}))
    (pci / "0000:02:00.0/msi_irqs").mkdir(parents=True)
    (pci / "0000:02:00.0/msi_irqs/40").write_text("msix\n")
    link = pci / "0000:01:00.0/net/ens1f0/device"
    link.unlink()
    os.symlink("../../../0000:02:00.0", link)
    assert read_device(root, "ens1f0") == DeviceIrqs("0000:02:00.0", None, frozenset({40}))


def _live_indexes() -> dict[str, int]:
    from nettop.kernel.rtnl import Rtnl

    rtnl = Rtnl()
    try:
        return {m.name: m.ifindex for m in rtnl.links()}
    finally:
        rtnl.close()


def test_kept_device_links_agree_with_read_device_and_follow_a_recreated_interface(veth_lab):
    """GIVEN every live interface (eth0's virtio device with its PCI parent, lo, the lab's
    veth) WHEN DeviceLinks answers tick after tick THEN each answer equals read_device's,
    only the first tick resolves the device links, and a veth deleted and made again under
    the same name (a new ifindex, another queue count) is resolved again and mapped with
    its new queues by the live HostReader."""
    from nettop.collectors.host import HostReader
    from nettop.collectors.queue_irqs import DeviceLinks
    from lab import run

    devices = DeviceLinks()
    indexes = _live_indexes()
    for tick in range(2):
        for name, ifindex in indexes.items():
            assert devices.read(LIVE, name, ifindex) == read_device(LIVE, name), name
        assert devices.resolved == (len(indexes) if tick == 0 else 0)
        devices.resolved = 0
    with HostReader(LIVE, [veth_lab.host_if]) as reader:
        first = reader.read()
        old_index = first.links[veth_lab.host_if].ifindex
        assert len(first.queue_maps[veth_lab.host_if].queues) == 8  # rx-0..3, tx-0..3
        reader.read()
        assert reader._devices.resolved == 0  # kept: no lstat or readlink this tick
        run(["ip", "link", "del", veth_lab.host_if])
        gone = reader.read()
        assert veth_lab.host_if not in gone.queue_maps
        run(["ip", "link", "add", veth_lab.host_if, "numtxqueues", "2", "numrxqueues", "2",
             "type", "veth", "peer", "name", veth_lab.peer_if, "netns", veth_lab.netns,
             "numtxqueues", "2", "numrxqueues", "2"])
        again = reader.read()
        assert again.links[veth_lab.host_if].ifindex != old_index
        assert reader._devices.resolved == 1
        assert len(again.queue_maps[veth_lab.host_if].queues) == 4  # rx-0..1, tx-0..1
        assert again.queue_maps[veth_lab.host_if] == map_all(
            LIVE, [veth_lab.host_if], again.interrupts, None)[0][veth_lab.host_if]


def test_a_captured_trees_device_links_are_resolved_once_and_its_maps_stay_those_of_a_fresh_read(tmp_path):
    """GIVEN a generated capture (eth0 on a PCI function with 64 queue vectors, lo) read by
    one HostReader WHEN ticks pass THEN only the first resolves the device links (a capture
    does not change), and every tick's queue maps equal those of a reader made afresh."""
    from nettop.collectors.host import HostReader
    from nettop.kernel.sysroot import SysRoot
    from stepped_clock import SteppedClock
    from treegen import generate_tree

    root = SysRoot(str(generate_tree(tmp_path / "h", cpus=16, irqs=200, queues=8)))
    with HostReader(root, clock=SteppedClock(1.0)) as reader:
        for tick in range(3):
            snap = reader.read()
            assert reader._devices.resolved == (2 if tick == 0 else 0), tick  # eth0 and lo (none)
            with HostReader(root) as fresh:
                assert snap.queue_maps == fresh.read().queue_maps
            assert len(snap.queue_maps["eth0"].queues) == 8  # combined rx+tx, one vector each


def test_vectors_renamed_under_the_sysfs_reader_change_the_map_it_keeps_by_identity(tmp_path):
    """GIVEN a tick's map keyed on the sysfs reader's names table and the msi listing (the
    same objects tick after tick: not compared again) WHEN the driver swaps two vectors'
    names on the same numbers (the same msi_irqs) THEN within the reader's recheck the
    map follows the new names, and a quiet tick gives the same map object."""
    from stepped_clock import SteppedClock
    from treegen import generate_tree

    from nettop.collectors.host import HostReader

    tree = generate_tree(tmp_path / "t", cpus=8, irqs=60, queues=4)
    with HostReader(SysRoot(str(tree), in_place=True), clock=SteppedClock(1.0)) as reader:
        first = reader.read().queue_maps["eth0"]
        assert {q.index: q.irqs for q in first.queues} == {0: (24,), 1: (25,), 2: (26,), 3: (27,)}
        assert reader.read().queue_maps["eth0"] is first
        for irq, name in ((24, "mlx5_comp1@pci:0000:81:00.0"), (25, "mlx5_comp0@pci:0000:81:00.0")):
            (tree / f"sys/kernel/irq/{irq}/actions").write_text(name + "\n")
        maps = [reader.read().queue_maps["eth0"] for _ in range(reader._irq_sysfs.recheck_every)]
    assert {q.index: q.irqs for q in maps[-1].queues} == {0: (25,), 1: (24,), 2: (26,), 3: (27,)}
