"""The real-driver tier's host side: a guest with a 4-queue virtio-net NIC and an e1000e NIC.

Both NICs are backed by tap devices in a network namespace made for the run (a
`multi_queue` tap with 4 queues for virtio-net, a plain one for e1000e), and qemu runs
inside that namespace: the guest's traffic reaches iperf3 servers there and nothing
else. Traffic the host sends into a multi-queue tap is spread over the tap's queues by
flow hash, and each tap queue is one virtio rx queue, so `iperf3 -R -P 8` from the guest
makes all four rx queues raise interrupts. The guest runs tests/vm_realdrv with the
same checkout (tests/vm/guest.py); files it writes to /tmp/vmout come back in `keep`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from vm import guest

HOST_VIRTIO, HOST_E1000E = "10.77.0.1", "10.77.1.1"  # the namespace's ends; the guest has .2
PORT_VIRTIO, PORT_E1000E = 5201, 5202
QUEUES = 4


@dataclass(frozen=True)
class Outcome:
    rc: int
    output: str
    kept: dict[str, bytes]  # files the guest left in /tmp/vmout


def devices() -> list[str]:
    """qemu arguments for the two NICs (no option ROMs: iPXE only slows the boot)."""
    return [
        "-netdev", f"tap,id=n0,ifname=rdtap0,script=no,downscript=no,queues={QUEUES},vhost=off",
        "-device", f"virtio-net-pci,netdev=n0,mq=on,vectors={2 * QUEUES + 2},mac=52:54:00:77:00:02,romfile=",
        "-netdev", "tap,id=n1,ifname=rdtap1,script=no,downscript=no,vhost=off",
        "-device", "e1000e,netdev=n1,mac=52:54:00:77:01:02,romfile=",
    ]


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True)


def _sweep_orphans() -> None:
    """Delete the namespaces of earlier runs whose process is gone: `host_side` removes
    its own in a `finally`, which a SIGKILLed run never reaches (one such namespace, with
    both taps, outlived a run on 26 Nov). A pid that is alive again keeps its name."""
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return
    for name in names:
        pid = name[len("nt-rd"):]
        if name.startswith("nt-rd") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


@contextmanager
def host_side() -> Iterator[str]:
    """The namespace with both taps addressed and an iperf3 server per NIC; removed after."""
    ns = f"nt-rd{os.getpid()}"
    _sweep_orphans()
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    _ip("netns", "add", ns)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "tuntap", "add", "dev", "rdtap0", "mode", "tap", "multi_queue")
        _ip("-n", ns, "tuntap", "add", "dev", "rdtap1", "mode", "tap")
        for dev, addr in (("rdtap0", HOST_VIRTIO), ("rdtap1", HOST_E1000E)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        for addr, port in ((HOST_VIRTIO, PORT_VIRTIO), (HOST_E1000E, PORT_E1000E)):
            servers.append(subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-B", addr, "-p", str(port)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield ns
    finally:
        for s in servers:
            s.kill()
            s.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def why_not() -> str | None:
    reason = guest.why_not()
    if reason:
        return reason
    for tool in ("iperf3", "ethtool", "ip"):
        if shutil.which(tool) is None:
            return f"the real-driver tier needs {tool} (./setup.sh installs it)"
    return None


def run(argv: list[str] | None = None, timeout: float = 1500) -> Outcome:
    """Build (or reuse) the guest, boot it with both NICs and run argv (default: the tier)."""
    work = guest.build()
    argv = argv or [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                    "-rA", "tests/vm_realdrv"]
    started = time.monotonic()
    with host_side() as ns:
        res = guest.run(argv, work=work, env={"NETTOP_IN_REALDRV": "1"}, cpus=4, mem_mb=1536,
                        devices=devices(), netns=ns, timeout=timeout, keep=True)
    out = res.output + f"\n[real-driver guest: {time.monotonic() - started:.0f} s]"
    return Outcome(res.rc, out, res.kept)


def effects(output: str) -> list[list[str]]:
    """The EFFECT rows the guest printed (see tests/vm_realdrv/conftest.py)."""
    rows = []
    for line in output.splitlines():
        if line.startswith("EFFECT\t"):
            rows.append(line.split("\t")[1:])
    return rows


def nic_drivers(output: str) -> dict[str, str]:
    """ifname -> driver from the NIC lines the guest printed (tests/vm_realdrv/conftest.py)."""
    out = {}
    for line in output.splitlines():
        parts = line.split("\t")
        if parts[0] == "NIC" and len(parts) == 3:
            out[parts[1]] = parts[2]
    return out


def name_drivers(rows: list[list[str]], drivers: dict[str, str]) -> list[list[str]]:
    """Rows with each NIC's name followed by its driver: "eth1" -> "eth1 (e1000e)"."""
    if not drivers:
        return rows
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(drivers, key=len, reverse=True)) + r")\b")
    return [[pattern.sub(lambda m: f"{m.group(1)} ({drivers[m.group(1)]})", cell) for cell in row]
            for row in rows]


def write_kept(outcome: Outcome, into: Path) -> list[Path]:
    paths = []
    for name, data in outcome.kept.items():
        p = into / name
        p.write_bytes(data)
        paths.append(p)
    return paths
