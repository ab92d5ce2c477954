"""The test lab: real hosts built from `ip netns` and multi-queue veth pairs.

A lab is one veth pair: one end (`host_if`) in the root namespace, where nettop reads the
live host, and its peer inside a namespace of its own that plays the remote host. Both
ends have 4 rx and 4 tx queues. Addresses come from 198.18.0.0/15 (RFC 2544 benchmark
range), a /30 per lab, so no route of the real host is shadowed and no traffic leaves
the machine. Everything is removed on exit, even when the test fails, and leftovers of
a killed run are swept at the next start.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Iterator

from nettop.actions.guardian import alive

PREFIX = "ntl"
_counter = itertools.count(1)


def run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a command (argv list, never a shell string) and capture its output."""
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def sysfs(path: str) -> str:
    """A sysfs/procfs file's value, stripped (what `cat` shows)."""
    with open(path) as f:
        return f.read().strip()


def tc_root(ifname: str) -> dict:
    """The root qdisc of an interface as `tc -j qdisc show` reports it."""
    return next(q for q in json.loads(run(["tc", "-j", "qdisc", "show", "dev", ifname]).stdout)
                if q.get("root"))


def irq_named(name: str) -> int | None:
    """The IRQ number whose /proc/interrupts line ends with this name, or None."""
    with open("/proc/interrupts") as f:
        for line in f:
            parts = line.split()
            if parts and parts[-1] == name:
                return int(parts[0].rstrip(":"))
    return None


def can_build_lab() -> str | None:
    """None when this process can build a lab, else the reason it cannot."""
    if os.geteuid() != 0:
        return "the lab needs root (ip netns, veth)"
    if not shutil.which("ip"):
        return "the lab needs iproute2 (`apt-get install iproute2`)"
    return None


def sweep_leftovers() -> None:
    """Delete lab namespaces and links left by runs whose process is gone."""
    out = run(["ip", "-j", "netns", "list"], check=False).stdout or "[]"
    try:
        names = [n["name"] for n in json.loads(out)]
    except ValueError:
        names = []
    for ns in names:
        m = re.fullmatch(rf"{PREFIX}-(\d+)-\d+", ns)
        if m and not alive(int(m.group(1))):
            run(["ip", "netns", "pids", ns], check=False)
            _kill_ns_pids(ns)
            run(["ip", "netns", "del", ns], check=False)
    links = run(["ip", "-j", "link", "show", "type", "veth"], check=False).stdout or "[]"
    try:
        ifnames = [link["ifname"] for link in json.loads(links) if "ifname" in link]  # [{}] without veth
    except ValueError:
        ifnames = []
    for name in ifnames:
        m = re.fullmatch(rf"{PREFIX}(\d+)x\d+h", name)
        if m and not alive(int(m.group(1))):
            run(["ip", "link", "del", name], check=False)


def _kill_ns_pids(ns: str) -> None:
    pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
    for p in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(p), signal.SIGKILL)


@dataclass
class VethLab:
    """One veth pair: `host_if` in the root namespace, `peer_if` inside `netns`."""

    netns: str
    host_if: str
    peer_if: str
    host_ip: str
    peer_ip: str
    _procs: list[subprocess.Popen] = field(default_factory=list)

    def ns(self, argv: list[str]) -> list[str]:
        """argv that runs `argv` inside the peer namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def ns_run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return run(self.ns(argv), check=check)

    def spawn(self, argv: list[str], in_ns: bool = False) -> subprocess.Popen:
        """Start a background process that is killed when the lab is torn down."""
        p = subprocess.Popen(
            self.ns(argv) if in_ns else argv,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self._procs.append(p)
        return p

    def iperf3_server(self, port: int = 5201) -> subprocess.Popen:
        """iperf3 server in the peer namespace, ready when this returns."""
        p = self.spawn(["iperf3", "-s", "-1", "-p", str(port), "-B", self.peer_ip], in_ns=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ss = self.ns_run(["ss", "-ltnH", f"sport = :{port}"], check=False).stdout
            if ss.strip():
                return p
            if p.poll() is not None:
                raise RuntimeError(f"iperf3 server exited: {p.stderr.read() if p.stderr else ''}")
            time.sleep(0.05)
        raise RuntimeError("iperf3 server did not start listening within 10 s")

    def iperf3_client(self, seconds: float, port: int = 5201, extra: list[str] | None = None,
                      reverse: bool = False) -> subprocess.Popen:
        """iperf3 client in the root namespace towards the peer (JSON report on stdout)."""
        argv = ["iperf3", "-c", self.peer_ip, "-p", str(port), "-B", self.host_ip,
                "-t", str(seconds), "-J", *(extra or [])]
        if reverse:
            argv.append("-R")
        return self.spawn(argv)

    def teardown(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(Exception):
                p.communicate(timeout=5)
        _kill_ns_pids(self.netns)
        run(["ip", "netns", "del", self.netns], check=False)
        run(["ip", "link", "del", self.host_if], check=False)


@contextlib.contextmanager
def veth_lab(queues: int = 4, mtu: int | None = None) -> Iterator[VethLab]:
    """Build a multi-queue veth pair with one end in a fresh namespace; always removed."""
    reason = can_build_lab()
    if reason:
        raise RuntimeError(reason)
    n = next(_counter)
    pid = os.getpid()
    # Link names are at most 15 characters: ntl<pid>x<n>h
    host_if = f"{PREFIX}{pid}x{n}h"
    peer_if = "eth1"
    netns = f"{PREFIX}-{pid}-{n}"
    subnet = (pid * 7 + n) % 16384
    third, fourth = divmod(subnet * 4, 256)
    base = f"198.{18 + third // 256}.{third % 256}"
    host_ip, peer_ip = f"{base}.{fourth + 1}", f"{base}.{fourth + 2}"
    lab = VethLab(netns, host_if, peer_if, host_ip, peer_ip)
    try:
        run(["ip", "netns", "add", netns])
        run(["ip", "link", "add", host_if, "numtxqueues", str(queues), "numrxqueues", str(queues),
             "type", "veth", "peer", "name", peer_if, "netns", netns,
             "numtxqueues", str(queues), "numrxqueues", str(queues)])
        if mtu:
            run(["ip", "link", "set", host_if, "mtu", str(mtu)])
            lab.ns_run(["ip", "link", "set", peer_if, "mtu", str(mtu)])
        run(["ip", "addr", "add", f"{host_ip}/30", "dev", host_if])
        run(["ip", "link", "set", host_if, "up"])
        lab.ns_run(["ip", "addr", "add", f"{peer_ip}/30", "dev", peer_if])
        lab.ns_run(["ip", "link", "set", peer_if, "up"])
        lab.ns_run(["ip", "link", "set", "lo", "up"])
        yield lab
    finally:
        lab.teardown()
