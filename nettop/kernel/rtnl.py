"""A minimal rtnetlink dumper for the two dumps nettop does every tick: links and qdiscs.

pyroute2 parses every attribute of every message into dicts, about 0.3 ms per interface;
on a container host with hundreds of veths that alone breaks the per-tick budget. These
dumps need a handful of attributes, so this module asks the kernel for them on one
long-lived socket and unpacks only those attributes with `struct`. Tuning actions, which
are rare, use pyroute2.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Callable, TypeVar

T = TypeVar("T")

NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
RTM_NEWLINK, RTM_GETLINK = 16, 18
RTM_NEWQDISC, RTM_GETQDISC = 36, 38

IFLA_IFNAME, IFLA_MTU, IFLA_MASTER, IFLA_TXQLEN = 3, 4, 10, 13
IFLA_OPERSTATE, IFLA_LINKINFO, IFLA_STATS64 = 16, 18, 23
IFLA_NUM_TX_QUEUES, IFLA_NUM_RX_QUEUES, IFLA_CARRIER_CHANGES = 31, 32, 35
IFLA_INFO_KIND, IFLA_INFO_SLAVE_KIND = 1, 4
OPERSTATES = ("unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up")

TCA_KIND, TCA_STATS2 = 1, 7
TCA_STATS_BASIC, TCA_STATS_QUEUE = 1, 3
TC_H_ROOT, TC_H_INGRESS = 0xFFFFFFFF, 0xFFFFFFF1  # clsact shares ingress's parent

_NLHDR = struct.Struct("=IHHII")
_ATTR = struct.Struct("=HH")
_IFINFO = struct.Struct("=BxHiII")
_TCMSG = struct.Struct("=BxxxiIII")
# the first sixteen fields of struct rtnl_link_stats64 (include/uapi/linux/if_link.h):
# rx_packets, tx_packets, rx_bytes, tx_bytes, rx_errors, tx_errors, rx_dropped,
# tx_dropped, multicast, collisions, rx_length_errors, rx_over_errors, rx_crc_errors,
# rx_frame_errors, rx_fifo_errors, rx_missed_errors
_STATS64 = struct.Struct("=16Q")
_STATS64_HEAD = struct.Struct("=10Q")
RX_OVER, RX_FIFO, RX_MISSED = 11, 14, 15  # the ring-overflow counters, as in sysfs statistics/
_BASIC = struct.Struct("=QI")
_QUEUE = struct.Struct("=5I")


@dataclass(frozen=True, slots=True)
class LinkMsg:
    ifindex: int
    name: str
    mtu: int
    txqlen: int
    operstate: str
    master: int | None
    kind: str | None
    slave_kind: str | None
    num_tx_queues: int
    num_rx_queues: int
    # rx_packets, tx_packets, rx_bytes, tx_bytes, rx_errors, tx_errors, rx_dropped,
    # tx_dropped, multicast, collisions
    stats: tuple[int, ...] | None
    # rx_over_errors + rx_fifo_errors + rx_missed_errors (the sum host_tuning.read_missed
    # takes from sysfs statistics/): the rx ring had no buffer for a frame
    rx_missed: int | None = None
    # carrier up/down transitions since the device was made: a link renegotiation (and so
    # a speed change) on a NIC goes through one (interfaces.LinkSpeeds)
    carrier_changes: int | None = None


@dataclass(frozen=True, slots=True)
class QdiscMsg:
    ifindex: int
    handle: int
    parent: int
    kind: str
    bytes: int
    packets: int
    qlen: int
    backlog: int
    drops: int
    requeues: int
    overlimits: int


def _attrs(data: bytes | memoryview, off: int, end: int) -> dict[int, memoryview]:
    out: dict[int, memoryview] = {}
    mv = memoryview(data)
    while off + 4 <= end:
        alen, atype = _ATTR.unpack_from(mv, off)
        if alen < 4:
            break
        out[atype & 0x3FFF] = mv[off + 4: off + alen]
        off += (alen + 3) & ~3
    return out


def _cstr(v: memoryview) -> str:
    return bytes(v).split(b"\0", 1)[0].decode("utf-8", "replace")


def _u32(v: memoryview) -> int:
    return int.from_bytes(v[:4], "little")


def parse_link(msg: memoryview, off: int, end: int) -> LinkMsg:
    _family, _type, index, _flags, _change = _IFINFO.unpack_from(msg, off)
    a = _attrs(msg, off + _IFINFO.size, end)
    kind = slave_kind = None
    if IFLA_LINKINFO in a:
        li = a[IFLA_LINKINFO]
        info = _attrs(li, 0, len(li))
        if IFLA_INFO_KIND in info:
            kind = _cstr(info[IFLA_INFO_KIND])
        if IFLA_INFO_SLAVE_KIND in info:
            slave_kind = _cstr(info[IFLA_INFO_SLAVE_KIND])
    op = _u32(a[IFLA_OPERSTATE]) if IFLA_OPERSTATE in a else 0
    stats = None
    missed = None
    if IFLA_STATS64 in a:
        raw = a[IFLA_STATS64]
        if len(raw) >= _STATS64.size:
            full = _STATS64.unpack_from(raw)
            stats, missed = full[:10], full[RX_OVER] + full[RX_FIFO] + full[RX_MISSED]
        elif len(raw) >= _STATS64_HEAD.size:
            stats = _STATS64_HEAD.unpack_from(raw)
    master = _u32(a[IFLA_MASTER]) if IFLA_MASTER in a else None
    return LinkMsg(
        ifindex=index,
        name=_cstr(a[IFLA_IFNAME]) if IFLA_IFNAME in a else f"if{index}",
        mtu=_u32(a[IFLA_MTU]) if IFLA_MTU in a else 0,
        txqlen=_u32(a[IFLA_TXQLEN]) if IFLA_TXQLEN in a else 0,
        operstate=OPERSTATES[op] if op < len(OPERSTATES) else "unknown",
        master=master or None,
        kind=kind,
        slave_kind=slave_kind,
        num_tx_queues=_u32(a[IFLA_NUM_TX_QUEUES]) if IFLA_NUM_TX_QUEUES in a else 0,
        num_rx_queues=_u32(a[IFLA_NUM_RX_QUEUES]) if IFLA_NUM_RX_QUEUES in a else 0,
        stats=stats,
        rx_missed=missed,
        carrier_changes=_u32(a[IFLA_CARRIER_CHANGES]) if IFLA_CARRIER_CHANGES in a else None,
    )


def parse_qdisc(msg: memoryview, off: int, end: int) -> QdiscMsg:
    _family, ifindex, handle, parent, _info = _TCMSG.unpack_from(msg, off)
    a = _attrs(msg, off + _TCMSG.size, end)
    nbytes = packets = qlen = backlog = drops = requeues = overlimits = 0
    if TCA_STATS2 in a:
        st = _attrs(a[TCA_STATS2], 0, len(a[TCA_STATS2]))
        if TCA_STATS_BASIC in st and len(st[TCA_STATS_BASIC]) >= 12:
            nbytes, packets = _BASIC.unpack_from(bytes(st[TCA_STATS_BASIC]).ljust(_BASIC.size, b"\0"))
        if TCA_STATS_QUEUE in st and len(st[TCA_STATS_QUEUE]) >= _QUEUE.size:
            qlen, backlog, drops, requeues, overlimits = _QUEUE.unpack_from(st[TCA_STATS_QUEUE])
    return QdiscMsg(ifindex, handle, parent, _cstr(a[TCA_KIND]) if TCA_KIND in a else "?",
                    nbytes, packets, qlen, backlog, drops, requeues, overlimits)


def tc_handle(h: int) -> str:
    """A qdisc handle as tc prints it: major in hex and a colon ("8001:")."""
    return f"{h >> 16:x}:"


def tc_parent(p: int) -> str:
    """A parent as tc prints it: "root", "ingress" or "major:minor" in hex."""
    if p == TC_H_ROOT:
        return "root"
    if p == TC_H_INGRESS:
        return "ingress"
    return f"{p >> 16:x}:{p & 0xFFFF:x}"


class Rtnl:
    """One NETLINK_ROUTE socket kept open across ticks."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                                   socket.NETLINK_ROUTE)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self._sock.bind((0, 0))
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def _dump(self, msg_type: int, body: bytes, want: int,
              parse: Callable[[memoryview, int, int], T]) -> list[T]:
        self._seq += 1
        seq = self._seq
        self._sock.send(_NLHDR.pack(_NLHDR.size + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)
        out: list[T] = []
        while True:
            data = self._sock.recv(1 << 16)
            off = 0
            while off + _NLHDR.size <= len(data):
                length, typ, _flags, mseq, _pid = _NLHDR.unpack_from(data, off)
                if length < _NLHDR.size:
                    return out
                end = off + length
                if mseq == seq:
                    if typ == NLMSG_DONE:
                        return out
                    if typ == NLMSG_ERROR:
                        err = -struct.unpack_from("=i", data, off + _NLHDR.size)[0]
                        if err:
                            raise OSError(err, os.strerror(err))
                        return out
                    if typ == want:
                        out.append(parse(memoryview(data), off + _NLHDR.size, end))
                off = (end + 3) & ~3

    def links(self) -> list[LinkMsg]:
        return self._dump(RTM_GETLINK, _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0), RTM_NEWLINK, parse_link)

    def qdiscs(self) -> list[QdiscMsg]:
        return self._dump(RTM_GETQDISC, _TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0), RTM_NEWQDISC, parse_qdisc)
