"""Independent readings for the real-driver tier: what the kernel and the drivers say.

Every figure nettop produces in tests/vm_realdrv is compared with one read here, with
code that shares nothing with nettop's collectors: a few lines of parsing of
/proc/interrupts, /proc/softirqs, /proc/net/softnet_stat and /proc/irq/N, the PCI
device's msi_irqs directory, and the real `ethtool -S` / `ethtool -c` / `ip` output.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

GUEST_VIRTIO, GUEST_E1000E = "10.77.0.2", "10.77.1.2"
HOST_VIRTIO, HOST_E1000E = "10.77.0.1", "10.77.1.1"
PORT_VIRTIO, PORT_E1000E = 5201, 5202


def sh(*argv: str) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout


@dataclass(frozen=True)
class Nics:
    virtio: str
    e1000e: str


def cpu_list(text: str) -> tuple[int, ...]:
    """'0-2,5' -> (0, 1, 2, 5)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def interrupts() -> dict[int, tuple[str, tuple[int, ...]]]:
    """IRQ number -> (action name, per-CPU counts) from /proc/interrupts."""
    lines = Path("/proc/interrupts").read_text().splitlines()
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        if not head.strip().isdigit():
            continue
        fields = rest.split()
        counts = tuple(int(x) for x in fields[:ncpu])
        out[int(head)] = (fields[-1], counts)
    return out


def net_rx() -> dict[int, int]:
    """CPU -> NET_RX softirqs from /proc/softirqs."""
    for line in Path("/proc/softirqs").read_text().splitlines():
        if line.split(":")[0].strip() == "NET_RX":
            return dict(enumerate(int(x) for x in line.split(":")[1].split()))
    raise AssertionError("no NET_RX line in /proc/softirqs")


def received_rps() -> dict[int, int]:
    """CPU -> softnet_stat's received_rps (10th column, hex)."""
    rows = Path("/proc/net/softnet_stat").read_text().splitlines()
    return {cpu: int(row.split()[9], 16) for cpu, row in enumerate(rows)}


def affinity(irq: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(requested, effective) CPUs of an IRQ."""
    base = Path(f"/proc/irq/{irq}")
    return (cpu_list((base / "smp_affinity_list").read_text()),
            cpu_list((base / "effective_affinity_list").read_text()))


def device_irqs(ifname: str) -> set[int]:
    """The MSI/MSI-X vectors of the PCI function behind ifname."""
    dev = Path(f"/sys/class/net/{ifname}/device").resolve()
    for d in (dev, dev.parent):
        if (d / "msi_irqs").is_dir():
            return {int(x) for x in os.listdir(d / "msi_irqs")}
    raise AssertionError(f"{ifname}: no msi_irqs under {dev}")


def queue_irqs(ifname: str) -> dict[tuple[str, int], int]:
    """(kind, queue) -> IRQ, from the names the two drivers give their vectors:
    virtio 'virtioN-input.K' / 'virtioN-output.K', e1000e 'IFACE-rx-K' / 'IFACE-tx-K'."""
    mine = device_irqs(ifname)
    out = {}
    for irq, (name, _) in interrupts().items():
        if irq not in mine:
            continue
        if "-input." in name or "-output." in name:
            kind = "rx" if "-input." in name else "tx"
            out[(kind, int(name.rsplit(".", 1)[1]))] = irq
        elif name.startswith(f"{ifname}-rx-") or name.startswith(f"{ifname}-tx-"):
            out[(name.split("-")[-2], int(name.rsplit("-", 1)[1]))] = irq
    return out


def ethtool_stats(ifname: str) -> dict[str, int]:
    out = {}
    for line in sh("ethtool", "-S", ifname).splitlines()[1:]:
        key, _, value = line.strip().partition(":")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def rx_queues(ifname: str) -> list[int]:
    return sorted(int(d[3:]) for d in os.listdir(f"/sys/class/net/{ifname}/queues") if d.startswith("rx-"))


def _driver(ifname: str) -> str | None:
    link = Path(f"/sys/class/net/{ifname}/device/driver")
    return link.resolve().name if link.exists() else None


def bring_up() -> Nics:
    """Load both drivers, find their interfaces by driver, address them and wait until the
    namespace's end of each answers a ping. AssertionError when a driver or NIC is missing."""
    for mod in ("virtio_net", "e1000e"):
        subprocess.run(["modprobe", mod], check=True)
    found: dict[str, str] = {}
    for _ in range(100):
        found = {d: n for n in os.listdir("/sys/class/net") if (d := _driver(n) or "")}
        if {"virtio_net", "e1000e"} <= found.keys():
            break
        time.sleep(0.1)
    assert {"virtio_net", "e1000e"} <= found.keys(), f"the guest lacks a NIC: drivers found {found}"
    nics = Nics(found["virtio_net"], found["e1000e"])
    for ifname, addr in ((nics.virtio, GUEST_VIRTIO), (nics.e1000e, GUEST_E1000E)):
        sh("ip", "addr", "add", f"{addr}/24", "dev", ifname)
        sh("ip", "link", "set", ifname, "up")
    for peer in (HOST_VIRTIO, HOST_E1000E):
        for _ in range(60):
            if subprocess.run(["ping", "-c1", "-W1", peer], capture_output=True).returncode == 0:
                break
        else:
            raise AssertionError(f"the namespace end {peer} does not answer: the tap or the NIC is not up")
    return nics


def iperf3(host: str, port: int, seconds: float, flows: int = 8, udp_rate: str | None = None) -> subprocess.Popen[str]:
    """Traffic from the namespace into the guest (-R), so the guest's rx queues interrupt."""
    argv = ["iperf3", "-c", host, "-p", str(port), "-R", "-t", f"{seconds:g}", "-P", str(flows), "--json"]
    if udp_rate:
        argv += ["-u", "-b", udp_rate]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
