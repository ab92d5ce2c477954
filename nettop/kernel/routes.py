"""The interfaces that carry the default route, read over rtnetlink (RTM_GETROUTE).

The summary screen puts the interface an operator cares about first: the one the host's
default route leaves by. That is a fact of the routing table, so it is asked of the
kernel on the same kind of socket as the link and qdisc dumps (`nettop.kernel.rtnl`),
never by running `ip route`. IPv4 and IPv6 default routes of the main table count, each
next hop of a multipath route too; the lowest metric comes first.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from nettop.kernel.rtnl import Rtnl, _attrs

RTM_NEWROUTE, RTM_GETROUTE = 24, 26
RT_TABLE_MAIN = 254
RTN_UNICAST = 1
RTA_OIF, RTA_PRIORITY, RTA_MULTIPATH, RTA_TABLE = 4, 6, 9, 15

_RTMSG = struct.Struct("=BBBBBBBBI")  # family dst_len src_len tos table protocol scope type flags
_RTNH = struct.Struct("=HBBi")  # rtnexthop: len flags hops ifindex


@dataclass(frozen=True, slots=True)
class Route:
    """One route as far as the default-route question needs it."""

    family: int
    dst_len: int
    table: int
    kind: int
    metric: int
    ifindexes: tuple[int, ...]  # the output interface, or each next hop's

    @property
    def is_default(self) -> bool:
        return self.dst_len == 0 and self.table == RT_TABLE_MAIN and self.kind == RTN_UNICAST


def parse_route(msg: memoryview, off: int, end: int) -> Route:
    family, dst_len, _src, _tos, table, _proto, _scope, kind, _flags = _RTMSG.unpack_from(msg, off)
    a = _attrs(msg, off + _RTMSG.size, end)
    if RTA_TABLE in a:
        table = int.from_bytes(a[RTA_TABLE][:4], "little")
    metric = int.from_bytes(a[RTA_PRIORITY][:4], "little") if RTA_PRIORITY in a else 0
    hops: list[int] = []
    if RTA_OIF in a:
        hops.append(int.from_bytes(a[RTA_OIF][:4], "little", signed=True))
    if RTA_MULTIPATH in a:
        mp = a[RTA_MULTIPATH]
        pos = 0
        while pos + _RTNH.size <= len(mp):
            length, _f, _h, ifindex = _RTNH.unpack_from(mp, pos)
            if length < _RTNH.size:
                break
            hops.append(ifindex)
            pos += (length + 3) & ~3
    return Route(family, dst_len, table, kind, metric, tuple(h for h in hops if h > 0))


class RouteReader(Rtnl):
    """A NETLINK_ROUTE socket that dumps the routing tables."""

    def routes(self) -> list[Route]:
        return self._dump(RTM_GETROUTE, _RTMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0, 0, 0, 0, 0),
                          RTM_NEWROUTE, parse_route)


def default_ifindexes(routes: list[Route]) -> tuple[int, ...]:
    """The interfaces of the default routes, lowest metric first, each once."""
    out: list[int] = []
    for r in sorted((r for r in routes if r.is_default), key=lambda r: (r.metric, r.family)):
        out += [i for i in r.ifindexes if i not in out]
    return tuple(out)


def read_default_ifindexes() -> tuple[int, ...]:
    """Ask the kernel now; () when it cannot be asked (no netlink, e.g. in a sandbox)."""
    try:
        reader = RouteReader()
    except OSError:
        return ()
    try:
        return default_ifindexes(reader.routes())
    except OSError:
        return ()
    finally:
        reader.close()


RTA_DST = 1
NLMSG_ERROR = 2


def _route_request(family: int, dst: bytes) -> bytes:
    """An RTM_GETROUTE body asking which route the kernel would use to reach `dst`."""
    body = _RTMSG.pack(family, len(dst) * 8, 0, 0, 0, 0, 0, 0, 0)
    attr = struct.pack("=HH", 4 + len(dst), RTA_DST) + dst
    return body + attr + b"\0" * (-len(attr) % 4)


def route_oif(address: str) -> int | None:
    """The ifindex the kernel's routing decision sends packets to `address` out of (what
    `ip route get ADDRESS` prints after `dev`), or None when there is no route or no
    netlink. Asked of this process's network namespace."""
    try:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        dst = socket.inet_pton(family, address.split("%", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
    except OSError:
        return None
    try:
        sock.settimeout(2.0)
        sock.bind((0, 0))
        body = _route_request(family, dst)
        sock.send(struct.pack("=IHHII", 16 + len(body), RTM_GETROUTE, 1, 1, 0) + body)  # NLM_F_REQUEST
        data = sock.recv(1 << 16)
    except OSError:
        return None
    finally:
        sock.close()
    off = 0
    while off + 16 <= len(data):
        length, typ, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
        if length < 16:
            break
        if typ == RTM_NEWROUTE:
            route = parse_route(memoryview(data), off + 16, off + length)
            return route.ifindexes[0] if route.ifindexes else None
        if typ == NLMSG_ERROR:
            return None
        off += (length + 3) & ~3
    return None
