"""Driver, bus address, NUMA node and local CPUs of an interface's device, on sysfs trees
laid out like the kernel's (relative symlinks: virtio_net on PCI, a PCI NIC on node 1, a
USB NIC), cross-checked live against `ethtool -i eth0`, and a lab veth without device."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nettop.collectors.cpus import parse_cpu_list, read_online_cpus
from nettop.collectors.device_info import (
    DeviceInfo,
    device_chain,
    local_cpus,
    parse_numa_node,
    read_device_info,
)
from nettop.kernel.sysroot import LIVE, SysRoot


def make_device(tmp: Path, ifname: str, dev_rel: str, bus: str,
                files: dict[str, dict[str, str | None]], drivers: dict[str, str]) -> SysRoot:
    """An interface whose device is sys/devices/<dev_rel>.

    files: {relative device dir: {name: text}} (text None: a directory in its place);
    drivers: {relative device dir: "bus/<bus>/drivers/<name>"} as relative symlinks.
    """
    sysd = tmp / "sys"
    dev = sysd / "devices" / dev_rel
    netdir = dev / "net" / ifname
    netdir.mkdir(parents=True)
    (sysd / "class/net").mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(dev, netdir), netdir / "device")
    os.symlink(os.path.relpath(netdir, sysd / "class/net"), sysd / "class/net" / ifname)
    (sysd / "bus" / bus).mkdir(parents=True, exist_ok=True)
    for rel, names in files.items():
        d = sysd / "devices" / rel
        for name, text in names.items():
            if text is None:
                (d / name).mkdir(parents=True)
            else:
                (d / name).write_text(text)
    for rel, target in drivers.items():
        (sysd / target).mkdir(parents=True, exist_ok=True)
        d = sysd / "devices" / rel
        os.symlink(os.path.relpath(sysd / target, d), d / "driver")
    return SysRoot(str(tmp))


def vm_eth0(tmp: Path, pci_files: dict | None = None) -> SysRoot:
    """This VM's eth0: virtio2 under PCI 0000:00:03.0, numa_node -1, local CPUs 0-1."""
    pci = "pci0000:00/0000:00:03.0"
    return make_device(
        tmp, "eth0", f"{pci}/virtio2", "virtio",
        files={pci: pci_files or {"numa_node": "-1\n", "local_cpulist": "0-1\n",
                                  "local_cpus": "3\n"}},
        drivers={f"{pci}/virtio2": "bus/virtio/drivers/virtio_net",
                 pci: "bus/pci/drivers/virtio-pci"},
    )


@pytest.mark.parametrize("text, node", [("-1\n", None), ("0\n", 0), ("1", 1)])
def test_parse_numa_node(text, node):
    assert parse_numa_node(text) == node


def test_virtio_net_walks_up_to_the_pci_function_but_keeps_its_own_driver(tmp_path):
    root = vm_eth0(tmp_path)
    info, problems = read_device_info(root, "eth0")
    assert problems == []
    assert info == DeviceInfo(numa_node=None, driver="virtio_net", bus_info="0000:00:03.0")
    assert local_cpus(root, "eth0") == (0, 1)
    chain = device_chain(root, "eth0")
    assert [os.path.basename(p) for p in chain] == ["virtio2", "0000:00:03.0", "pci0000:00"]


def test_pci_nic_on_node_1(tmp_path):
    bdf = "pci0000:80/0000:80:01.0/0000:81:00.0"
    root = make_device(tmp_path, "ens1f0np0", bdf, "pci",
                       files={bdf: {"numa_node": "1\n", "local_cpulist": "16-31,48-63\n"}},
                       drivers={bdf: "bus/pci/drivers/mlx5_core"})
    info, problems = read_device_info(root, "ens1f0np0")
    assert problems == []
    assert info == DeviceInfo(numa_node=1, driver="mlx5_core", bus_info="0000:81:00.0")
    assert local_cpus(root, "ens1f0np0") == tuple(range(16, 32)) + tuple(range(48, 64))


def test_usb_nic_takes_numa_from_its_controller_and_names_itself(tmp_path):
    ctrl = "pci0000:00/0000:00:14.0"
    intf = f"{ctrl}/usb2/2-1/2-1:1.0"
    root = make_device(tmp_path, "enx001122334455", intf, "usb",
                       files={ctrl: {"numa_node": "0\n", "local_cpulist": "0-7\n"}},
                       drivers={intf: "bus/usb/drivers/r8152", ctrl: "bus/pci/drivers/xhci_hcd"})
    info, problems = read_device_info(root, "enx001122334455")
    assert problems == []
    assert info == DeviceInfo(numa_node=0, driver="r8152", bus_info="2-1:1.0")
    assert local_cpus(root, "enx001122334455") == tuple(range(8))


def test_interface_without_device(tmp_path):
    (tmp_path / "sys/class/net/veth0").mkdir(parents=True)
    root = SysRoot(str(tmp_path))
    assert read_device_info(root, "veth0") == (DeviceInfo(), [])
    assert local_cpus(root, "veth0") is None
    assert read_device_info(root, "gone0") == (DeviceInfo(), [])


def test_unreadable_numa_node_is_a_one_line_problem(tmp_path):
    root = vm_eth0(tmp_path, {"numa_node": None, "local_cpulist": "0-1\n"})
    info, problems = read_device_info(root, "eth0")
    assert info.numa_node is None and info.driver == "virtio_net"
    assert len(problems) == 1
    assert "0000:00:03.0/numa_node" in problems[0].message and "\n" not in problems[0].message


def test_malformed_numa_node_and_local_cpulist(tmp_path):
    root = vm_eth0(tmp_path, {"numa_node": "node0\n", "local_cpulist": "zz\n"})
    info, problems = read_device_info(root, "eth0")
    assert info.numa_node is None
    assert len(problems) == 1 and "malformed" in problems[0].message
    assert local_cpus(root, "eth0") is None


def test_dangling_driver_link_means_no_driver(tmp_path):
    root = vm_eth0(tmp_path)
    link = tmp_path / "sys/devices/pci0000:00/0000:00:03.0/virtio2/driver"
    link.unlink()
    os.symlink("../../../../bus/virtio/drivers/unbound", link)
    info, problems = read_device_info(root, "eth0")
    # readlink still names the driver the link points at, as `ethtool -i` would
    assert info.driver == "unbound" and problems == []


@pytest.mark.live
def test_live_eth0_matches_ethtool():
    if not os.path.exists("/sys/class/net/eth0/device") or not shutil.which("ethtool"):
        pytest.skip("needs eth0 with a device and ethtool")
    info, problems = read_device_info(LIVE, "eth0")
    assert problems == []
    out = subprocess.run(["ethtool", "-i", "eth0"], capture_output=True, text=True,
                         check=True).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert info.driver == fields["driver"]
    assert info.bus_info == fields["bus-info"]
    pci = os.path.join("/sys/bus/pci/devices", info.bus_info)
    node = int(Path(pci, "numa_node").read_text())
    assert info.numa_node == (None if node < 0 else node)
    cpus = local_cpus(LIVE, "eth0")
    assert cpus == parse_cpu_list(Path(pci, "local_cpulist").read_text())
    assert set(read_online_cpus(LIVE)[0]) <= set(cpus)


@pytest.mark.lab
def test_lab_veth_has_no_device(veth_lab):
    assert read_device_info(LIVE, veth_lab.host_if) == (DeviceInfo(), [])
    assert local_cpus(LIVE, veth_lab.host_if) is None
    out = subprocess.run(["ethtool", "-i", veth_lab.host_if], capture_output=True, text=True,
                         check=True).stdout
    fields = dict(line.partition(":")[::2] for line in out.splitlines())
    assert fields["driver"].strip() == "veth"  # a driver, but no device behind it
    assert fields["bus-info"].strip() == ""
