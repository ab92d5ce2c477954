"""What hardware sits behind an interface: driver, PCI address, NUMA node, local CPUs.

These decide how a NIC should be tuned: its IRQs and RPS/XPS masks belong on the CPUs of
its own NUMA node (`local_cpulist` of the PCI function), and the driver name says which
queue naming and which ethtool knobs to expect. They do not change while the device
exists, so the sampler reads them once per (name, ifindex).

`sys/class/net/IF/device` is not always the PCI function: for virtio_net it is the
virtio device (`virtio2`) whose parent is the PCI function, for USB NICs an interface
a few levels below the controller. So each fact is taken from the nearest ancestor that
has it: the driver from the device itself (`virtio_net`, not the parent's `virtio-pci`),
`numa_node` and `local_cpulist` from the PCI function. Interfaces without a device
(veth, bridge, bond, loopback) have none of these, which is not a problem.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from nettop.collectors.cpus import parse_cpu_list
from nettop.collectors.numbers import MAX_NODES, signed_decimal
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.kernel.sysroot import SysRoot

_BDF = re.compile(r"[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_VIRTIO = re.compile(r"virtio\d+", re.ASCII)
_MAX_UP = 4  # usb interface -> usb device -> usb bus -> PCI controller


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    numa_node: int | None = None
    driver: str | None = None
    bus_info: str | None = None  # PCI address "0000:00:03.0", else the device's own name


def device_chain(root: SysRoot, ifname: str) -> list[str]:
    """Absolute paths of the interface's device and its ancestors, nearest first, up to
    (not including) sys/devices; [] when the interface has no device."""
    link = root.join(f"sys/class/net/{ifname}/device")
    if not os.path.lexists(link):
        return []
    top = os.path.realpath(root.join("sys/devices"))
    path = os.path.realpath(link)
    chain: list[str] = []
    while len(chain) <= _MAX_UP and path.startswith(top + os.sep):
        chain.append(path)
        path = os.path.dirname(path)
    return chain


def parse_numa_node(text: str) -> int | None:
    """numa_node text -> node; -1 (no NUMA information) -> None; raises ValueError."""
    node = signed_decimal(text, "numa_node")
    if node >= MAX_NODES:
        raise ValueError(f"numa_node {node} is beyond any NUMA node ({MAX_NODES - 1})")
    return None if node < 0 else node


def bus_info_of(chain: list[str]) -> str | None:
    """The PCI address of the device, or of the PCI function a virtio device sits on;
    else the device's own name ("2-1:1.0" for a USB NIC, not its controller's address)."""
    if not chain:
        return None
    name = os.path.basename(chain[0])
    if _BDF.fullmatch(name):
        return name.lower()
    if _VIRTIO.fullmatch(name) and len(chain) > 1:
        parent = os.path.basename(chain[1])
        if _BDF.fullmatch(parent):
            return parent.lower()
    return name


def read_device_info(root: SysRoot, ifname: str) -> tuple[DeviceInfo, list[Problem]]:
    """Driver, bus address and NUMA node of the interface's device."""
    chain = device_chain(root, ifname)
    if not chain:
        return DeviceInfo(), []
    problems: list[Problem] = []
    return DeviceInfo(
        numa_node=_numa_node(chain, problems),
        driver=_driver(chain[:2]),
        bus_info=bus_info_of(chain),
    ), problems


def local_cpus(root: SysRoot, ifname: str) -> tuple[int, ...] | None:
    """CPUs local to the interface's PCI device (its `local_cpulist`), None if unknown."""
    for path in device_chain(root, ifname):
        try:
            with open(os.path.join(path, "local_cpulist"), "rb") as f:
                text = f.read().decode("ascii", "replace")
        except OSError:
            continue
        try:
            return parse_cpu_list(text) or None
        except ValueError:
            return None
    return None


def _numa_node(chain: list[str], problems: list[Problem]) -> int | None:
    for path in chain:
        fpath = os.path.join(path, "numa_node")
        try:
            with open(fpath, "rb") as f:
                text = f.read().decode("ascii", "replace").strip()
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue
            problems.append(from_oserror(fpath, exc))
            return None
        try:
            return parse_numa_node(text)
        except ValueError:
            problems.append(malformed(fpath, repr(text[:40])))
            return None
    return None


def _driver(chain: list[str]) -> str | None:
    for path in chain:
        try:
            return os.path.basename(os.readlink(os.path.join(path, "driver")))
        except OSError:
            continue
    return None
