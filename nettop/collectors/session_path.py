"""The operator's own session: which interfaces, queues, IRQs and CPUs carry it.

nettop is mostly used over SSH, and several of its changes can cut the very connection
that made them (a shaping qdisc on the NIC that carries the session, fewer channels, an
MTU, an IRQ moved onto a starved CPU). To protect that path it must first be known:
the peer comes from `SSH_CONNECTION` (set by sshd for the session's shell), else from
the TCP socket of the nearest `sshd` ancestor of this process (su, sudo and tmux inside
the session keep it as an ancestor; a tmux server started elsewhere does not). The
kernel's routing decision towards the peer names the interface; everything below it
(bond slaves, a VLAN's parent, a bridge's ports, recursively) carries the session too.
Which queue a flow hashes to is not visible from here, so every queue of those devices,
the IRQs that serve them and the CPUs those IRQs and RPS masks point at count.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Mapping

from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.snapshot import Snapshot

_MAX_DEPTH = 8  # stacked devices (bond on VLAN on bridge ...) deeper than this are a loop


@dataclass(frozen=True, slots=True)
class Peer:
    """Both ends of the session's TCP connection, and how nettop learnt them."""

    remote: str
    remote_port: int | None
    local: str | None
    local_port: int | None
    source: str  # "SSH_CONNECTION", "sshd (pid 812)"


@dataclass(frozen=True, slots=True)
class SessionPath:
    """The interfaces that carry the operator's session; `devices` is top-down."""

    peer: Peer
    ifname: str | None  # the interface the route to the peer leaves by
    devices: tuple[str, ...] = ()  # ifname and every device below it
    nics: tuple[str, ...] = ()  # the bottom of the stack: the devices with queues and IRQs
    problem: str | None = None  # why the path is not (fully) known

    def carries(self, ifname: str) -> bool:
        return ifname in self.devices

    def describe(self) -> str:
        """One line for the header and the JSON: "ssh 198.18.0.1 via eth0 (bond0 ← eth0)"."""
        if self.ifname is None:
            return f"ssh from {self.peer.remote}: {self.problem or 'path unknown'}"
        below = [d for d in self.devices if d != self.ifname]
        return f"ssh from {self.peer.remote} via {self.ifname}" + (f" ({', '.join(below)})" if below else "")


@dataclass(frozen=True, slots=True)
class PathResources:
    """What serves the session on a given snapshot: queues, their IRQs, and CPUs."""

    queues: tuple[tuple[str, str], ...]  # (ifname, "rx-0")
    irqs: tuple[int, ...]
    cpus: tuple[int, ...]


def peer_from_env(environ: Mapping[str, str]) -> Peer | None:
    """The peer sshd wrote into the session's environment ("client cport server sport")."""
    words = environ.get("SSH_CONNECTION", "").split()
    if len(words) != 4:
        return None
    try:
        remote = str(ipaddress.ip_address(words[0].split("%", 1)[0]))
        local = str(ipaddress.ip_address(words[2].split("%", 1)[0]))
        rport, lport = int(words[1]), int(words[3])
    except ValueError:
        return None
    return Peer(remote, rport, local, lport, "SSH_CONNECTION")


def _stat_fields(root: SysRoot, pid: int) -> tuple[str, int] | None:
    """(comm, ppid) of a process from /proc/PID/stat; comm may hold spaces and parens."""
    try:
        text = root.read_text(f"/proc/{pid}/stat")
    except OSError:
        return None
    lp, rp = text.find("("), text.rfind(")")
    if lp < 0 or rp < lp:
        return None
    rest = text[rp + 2:].split()
    try:
        return text[lp + 1:rp], int(rest[1])
    except (IndexError, ValueError):
        return None


def _sshd_ancestor(root: SysRoot, pid: int) -> int | None:
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        fields = _stat_fields(root, pid)
        if fields is None:
            return None
        comm, ppid = fields
        if comm == "sshd" or comm.startswith("sshd-"):
            return pid
        pid = ppid
    return None


def _socket_inodes(root: SysRoot, pid: int) -> set[str]:
    out: set[str] = set()
    try:
        fds = root.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = root.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _hex_addr(text: str) -> tuple[str, int]:
    """An address:port of /proc/net/tcp{,6} (host-order 32-bit words in hex)."""
    addr, port = text.split(":")
    raw = bytes.fromhex(addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped), int(port, 16)
    return str(ip), int(port, 16)


def peer_of_sshd(root: SysRoot = LIVE, pid: int | None = None) -> Peer | None:
    """The peer of the established TCP socket held by the nearest sshd ancestor."""
    sshd = _sshd_ancestor(root, os.getpid() if pid is None else pid)
    if sshd is None:
        return None
    inodes = _socket_inodes(root, sshd)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = root.read_text(table).splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "01" and f[9] in inodes:  # 01: ESTABLISHED
                try:
                    local, lport = _hex_addr(f[1])
                    remote, rport = _hex_addr(f[2])
                except ValueError:
                    continue
                return Peer(remote, rport, local, lport, f"sshd (pid {sshd})")
    return None


def find_peer(environ: Mapping[str, str] | None = None, root: SysRoot = LIVE) -> Peer | None:
    """The session's peer, from the environment first, then from the sshd ancestor."""
    peer = peer_from_env(os.environ if environ is None else environ)
    return peer if peer is not None else peer_of_sshd(root)


def lower_devices(root: SysRoot, ifname: str) -> list[str]:
    """The devices directly below `ifname`: a bond's slaves, a VLAN's or macvlan's parent
    (sysfs `lower_*` links) and a bridge's ports (`brif/`)."""
    out: list[str] = []
    try:
        entries = root.listdir(f"/sys/class/net/{ifname}")
    except OSError:
        return out
    out += sorted(e[len("lower_"):] for e in entries if e.startswith("lower_"))
    if "brif" in entries:
        try:
            out += sorted(p for p in root.listdir(f"/sys/class/net/{ifname}/brif") if p not in out)
        except OSError:
            pass
    return out


def stack_below(root: SysRoot, ifname: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every device from `ifname` down, top first; the bottom ones)."""
    devices: list[str] = []
    bottom: list[str] = []

    def walk(name: str, depth: int) -> None:
        if name in devices or depth > _MAX_DEPTH:
            return
        devices.append(name)
        lower = lower_devices(root, name)
        if not lower and name not in bottom:
            bottom.append(name)
        for d in lower:
            walk(d, depth + 1)

    walk(ifname, 0)
    return tuple(devices), tuple(bottom)


def resolve(peer: Peer, root: SysRoot = LIVE) -> SessionPath:
    """The path towards `peer` as the kernel routes it now (this network namespace)."""
    from nettop.kernel.routes import route_oif

    index = route_oif(peer.remote)
    if index is None:
        return SessionPath(peer, None, problem=f"no route to {peer.remote}")
    try:
        ifname = socket.if_indextoname(index)
    except OSError:
        return SessionPath(peer, None, problem=f"the route to {peer.remote} leaves by ifindex {index}, which is gone")
    devices, nics = stack_below(root, ifname)
    return SessionPath(peer, ifname, devices, nics)


def detect(environ: Mapping[str, str] | None = None, root: SysRoot = LIVE) -> SessionPath | None:
    """The live session's path, or None when nettop does not run inside an SSH session
    (the console, a captured tree)."""
    if not root.live:
        return None
    peer = find_peer(environ, root)
    return None if peer is None else resolve(peer, root)


def _mask_cpus(mask: str | None) -> set[int]:
    if not mask:
        return set()
    try:
        value = int(mask.replace(",", ""), 16)
    except ValueError:
        return set()
    return {i for i in range(value.bit_length()) if value >> i & 1}


def resources(path: SessionPath, snap: Snapshot) -> PathResources:
    """The queues, IRQs and CPUs that serve the path's devices in this snapshot."""
    queues: list[tuple[str, str]] = []
    irqs: set[int] = set()
    cpus: set[int] = set()
    for dev in path.devices:
        cfg = snap.devices.get(dev)
        if cfg is not None:
            for q in cfg.queues:
                queues.append((dev, f"{q.kind}-{q.index}"))
                cpus |= _mask_cpus(q.rps_cpus if q.kind == "rx" else q.xps_cpus)
        qmap = snap.queue_maps.get(dev)
        if qmap is not None:
            for qi in qmap.queues:
                irqs.update(qi.irqs)
    for irq in irqs:
        aff = snap.irq_affinity.get(irq)
        if aff is not None:
            cpus.update(aff.effective or aff.affinity or ())
    return PathResources(tuple(queues), tuple(sorted(irqs)), tuple(sorted(cpus)))


def to_json(path: SessionPath | None, snap: Snapshot | None = None) -> dict[str, object] | None:
    """The session as `nettop snapshot --json` carries it (docs/snapshot-json.md)."""
    if path is None:
        return None
    doc: dict[str, object] = {
        "peer": path.peer.remote, "peer_port": path.peer.remote_port,
        "local": path.peer.local, "local_port": path.peer.local_port, "source": path.peer.source,
        "ifname": path.ifname, "devices": list(path.devices), "nics": list(path.nics),
        "problem": path.problem,
    }
    if snap is not None:
        res = resources(path, snap)
        doc.update(queues=[f"{i} {q}" for i, q in res.queues], irqs=list(res.irqs), cpus=list(res.cpus))
    return doc
