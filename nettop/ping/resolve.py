"""Targets as the user writes them, their addresses, and the default gateway.

A target is "host" (ICMP echo), "tcp://host:port" (time to SYN-ACK) or
"udp://host:port" (time to a reply or to the ICMP port unreachable); IPv6 literals
go in brackets when a port follows. With no target given, nettop probes the default
gateway, read from /proc/net/route and /proc/net/ipv6_route (pure parsers below).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from nettop.kernel.sysroot import LIVE, SysRoot

RTF_UP = 0x0001
RTF_GATEWAY = 0x0002
RTF_REJECT = 0x0200
NO_DEFAULT_GATEWAY = ("no ping target: no default gateway in /proc/net/route or "
                      "/proc/net/ipv6_route; name targets to probe (host, tcp://host:port)")


@dataclass(frozen=True, slots=True)
class TargetSpec:
    text: str  # exactly as given; the key of Prober.take()
    kind: str  # "icmp", "tcp" or "udp"
    host: str
    port: int = 0


def parse_target(text: str) -> TargetSpec:
    """Split a target string; raises ValueError with a one-line reason."""
    t = text.strip()
    for kind in ("tcp", "udp", "icmp"):
        prefix = kind + "://"
        if t.lower().startswith(prefix):
            rest = t[len(prefix):]
            break
    else:
        if "://" in t:
            raise ValueError(f"{text!r}: unknown scheme (use host, tcp://host:port or "
                             "udp://host:port)")
        kind, rest = "icmp", t
    if kind == "icmp":
        host = rest[1:-1] if rest.startswith("[") and rest.endswith("]") else rest
        if not host:
            raise ValueError(f"{text!r}: empty host")
        return TargetSpec(text, "icmp", host)
    if rest.startswith("["):
        host, sep, port = rest[1:].partition("]:")
    else:
        host, sep, port = rest.rpartition(":")
    if not sep or not host or ":" in host and not rest.startswith("["):
        raise ValueError(f"{text!r}: expected {kind}://host:port ([addr]:port for IPv6)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: port must be 1-65535")
    return TargetSpec(text, kind, host, int(port))


def resolve(spec: TargetSpec) -> tuple[int, tuple]:
    """(family, sockaddr) of the target's first address; raises OSError (gaierror)."""
    kind = socket.SOCK_STREAM if spec.kind == "tcp" else socket.SOCK_DGRAM
    infos = socket.getaddrinfo(spec.host, spec.port, 0, kind)
    family, _type, _proto, _canon, sockaddr = infos[0]
    return family, sockaddr


def resolve_error(spec: TargetSpec, exc: OSError) -> str:
    reason = exc.strerror or str(exc) or exc.__class__.__name__
    return f"cannot resolve {spec.host!r}: {reason}"


def parse_route_gateway(text: str) -> str | None:
    """The IPv4 default gateway in /proc/net/route text (lowest metric), else None."""
    best: tuple[int, str] | None = None
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        try:
            dest, gw, flags, metric, mask = (int(f[1], 16), int(f[2], 16), int(f[3], 16),
                                             int(f[6]), int(f[7], 16))
        except ValueError:
            continue
        if dest or mask or not flags & RTF_UP or not flags & RTF_GATEWAY or flags & RTF_REJECT:
            continue
        # The kernel prints the address in host (little-endian) byte order.
        addr = socket.inet_ntoa(struct.pack("<I", gw))
        if best is None or metric < best[0]:
            best = (metric, addr)
    return best[1] if best else None


def parse_ipv6_route_gateway(text: str) -> str | None:
    """The IPv6 default gateway in /proc/net/ipv6_route text (lowest metric), else None.

    Columns: dest, dest prefix len, src, src prefix len, next hop, metric, refcnt, use,
    flags, device; all hex.
    """
    best: tuple[int, str] | None = None
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10:
            continue
        try:
            plen, nexthop, metric, flags = int(f[1], 16), bytes.fromhex(f[4]), int(f[5], 16), \
                int(f[8], 16)
        except ValueError:
            continue
        if plen or int(f[0], 16) or flags & RTF_REJECT or not flags & RTF_GATEWAY:
            continue
        if len(nexthop) != 16 or not any(nexthop):
            continue
        addr = socket.inet_ntop(socket.AF_INET6, nexthop)
        if addr.startswith("fe80:"):
            addr += "%" + f[9]  # a link-local next hop needs its interface
        if best is None or metric < best[0]:
            best = (metric, addr)
    return best[1] if best else None


def default_targets(root: SysRoot = LIVE) -> list[str]:
    """The default gateway (IPv4 first, else IPv6) as a one-item list, or [].

    An empty list means "no target": show NO_DEFAULT_GATEWAY instead of statistics.
    """
    for rel, parse in (("proc/net/route", parse_route_gateway),
                       ("proc/net/ipv6_route", parse_ipv6_route_gateway)):
        try:
            gw = parse(root.read_text(rel))
        except OSError:
            continue
        if gw:
            return [gw]
    return []
