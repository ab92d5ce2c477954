"""Raw netlink sockets: dumps and acknowledged requests, with the kernel's extack text.

nettop asks the kernel over netlink every tick (links, qdiscs, netdev queues and NAPIs,
queue stats). pyroute2 decodes every attribute of every message into objects and runs
an event loop per request, which costs more than the rest of a tick; these few requests
need a handful of attributes each, so they are sent on long-lived sockets and the
answers are unpacked with `struct`, attribute by attribute, only where asked.

A refused request raises `NetlinkError`, an `OSError` whose `extack` holds the kernel's
own explanation ("ethtool: unsupported parameter"), because that text is what tells an
operator what to do. Generic-netlink families are resolved by name through nlctrl.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass
from typing import Iterator

NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLM_F_CAPPED, NLM_F_ACK_TLVS = 0x100, 0x200  # flags of an NLMSG_ERROR
NLA_F_NESTED = 0x8000
SOL_NETLINK = 270
NETLINK_CAP_ACK, NETLINK_EXT_ACK = 10, 11
NLMSGERR_ATTR_MSG, NLMSGERR_ATTR_OFFS = 1, 2
NETLINK_GENERIC = 16
GENL_ID_CTRL, CTRL_CMD_GETFAMILY = 0x10, 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME, CTRL_ATTR_OPS, CTRL_ATTR_OP_ID = 1, 2, 6, 1
CTRL_ATTR_MCAST_GROUPS, CTRL_ATTR_MCAST_GRP_NAME, CTRL_ATTR_MCAST_GRP_ID = 7, 1, 2
NETLINK_ADD_MEMBERSHIP = 1

HDR = struct.Struct("=IHHII")
GENL = struct.Struct("=BBH")
_ATTR = struct.Struct("=HH")
_ERR = struct.Struct("=i")


class NetlinkError(OSError):
    """A request the kernel refused: errno, strerror and the kernel's extack text (or None)."""

    def __init__(self, code: int, extack: str | None = None, what: str = "") -> None:
        text = os.strerror(code)
        if extack:
            text = f"{text}: {extack}"
        super().__init__(code, f"{what}: {text}" if what else text)
        self.extack = extack


@dataclass(frozen=True, slots=True)
class Message:
    """One reply: its type, flags and a view of its payload (after the netlink header)."""

    type: int
    flags: int
    payload: memoryview


def attrs(data: memoryview, off: int = 0, end: int | None = None) -> dict[int, memoryview]:
    """Attribute id (flags masked) → value bytes of a run of netlink attributes."""
    out: dict[int, memoryview] = {}
    end = len(data) if end is None else end
    while off + 4 <= end:
        alen, atype = _ATTR.unpack_from(data, off)
        if alen < 4 or off + alen > end:
            break
        out[atype & 0x3FFF] = data[off + 4: off + alen]
        off += (alen + 3) & ~3
    return out


def attr_list(data: memoryview, off: int = 0, end: int | None = None) -> Iterator[tuple[int, memoryview]]:
    """The same run of attributes in order, repeats kept (nested lists such as bitsets)."""
    end = len(data) if end is None else end
    while off + 4 <= end:
        alen, atype = _ATTR.unpack_from(data, off)
        if alen < 4 or off + alen > end:
            return
        yield atype & 0x3FFF, data[off + 4: off + alen]
        off += (alen + 3) & ~3


def attr(atype: int, value: bytes) -> bytes:
    """One attribute, padded to 4 bytes."""
    raw = _ATTR.pack(4 + len(value), atype) + value
    return raw + b"\0" * (-len(raw) % 4)


def nest(atype: int, *children: bytes) -> bytes:
    return attr(atype | NLA_F_NESTED, b"".join(children))


def u8(v: int) -> bytes:
    return struct.pack("=B", v)


def u16(v: int) -> bytes:
    return struct.pack("=H", v)


def u32(v: int) -> bytes:
    return struct.pack("=I", v)


def cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def as_int(v: memoryview) -> int:
    """An unsigned integer attribute of any width (netlink "uint" is 4 or 8 bytes)."""
    return int.from_bytes(v, "little")


def as_str(v: memoryview) -> str:
    return bytes(v).split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_error(payload: memoryview, flags: int) -> tuple[int, str | None]:
    """(errno, extack message) of an NLMSG_ERROR payload; errno 0 is an ACK."""
    code = -_ERR.unpack_from(payload, 0)[0]
    extack = None
    if flags & NLM_F_ACK_TLVS and len(payload) >= 4 + HDR.size:
        inner_len = HDR.unpack_from(payload, 4)[0]
        off = 4 + (HDR.size if flags & NLM_F_CAPPED else max(inner_len, HDR.size))
        off = (off + 3) & ~3
        msg = attrs(payload, off).get(NLMSGERR_ATTR_MSG)
        if msg is not None:
            extack = as_str(msg) or None
    return code, extack


def _walk(data: memoryview, what: str = "") -> Iterator[tuple[int, int, int, memoryview]]:
    """(type, flags, seq, payload) of each message in one datagram, in order; a length
    that runs past the datagram raises NetlinkError (EPROTO)."""
    off = 0
    while off + HDR.size <= len(data):
        length, typ, mflags, mseq, _pid = HDR.unpack_from(data, off)
        if length < HDR.size or off + length > len(data):
            raise NetlinkError(errno.EPROTO, None, what or "truncated netlink message")
        yield typ, mflags, mseq, data[off + HDR.size: off + length]
        off = (off + length + 3) & ~3


class NetlinkSocket:
    """One netlink socket kept open across requests; not thread-safe (one owner thread)."""

    def __init__(self, protocol: int) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, protocol)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            for opt in (NETLINK_EXT_ACK, NETLINK_CAP_ACK):
                try:
                    self._sock.setsockopt(SOL_NETLINK, opt, 1)
                except OSError:
                    pass  # kernels before 4.12: errors come without extack
            self._sock.bind((0, 0))
        except OSError:
            self._sock.close()
            raise
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> NetlinkSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, msg_type: int, body: bytes, flags: int = NLM_F_ACK, what: str = "") -> list[Message]:
        """Send one request and collect its replies until DONE or the final ACK/error.

        `flags` is NLM_F_DUMP for a dump or NLM_F_ACK for a change; a refusal raises
        NetlinkError (errno and extack) whether it comes as an error or inside DONE."""
        if self._sock.fileno() < 0:
            raise NetlinkError(errno.EBADF, None, what or "netlink socket is closed")
        self._seq += 1
        seq = self._seq
        self._sock.send(HDR.pack(HDR.size + len(body), msg_type, NLM_F_REQUEST | flags, seq, 0) + body)
        out: list[Message] = []
        while True:
            for typ, mflags, mseq, payload in _walk(memoryview(self._sock.recv(1 << 17)), what):
                if mseq != seq:
                    continue  # a late answer to an earlier request
                if typ == NLMSG_ERROR or typ == NLMSG_DONE:
                    if typ == NLMSG_DONE and len(payload) < 4:
                        return out
                    code, extack = parse_error(payload, mflags)
                    if code:
                        raise NetlinkError(code, extack, what)
                    return out
                out.append(Message(typ, mflags, payload))
                if not flags & NLM_F_DUMP and not flags & NLM_F_ACK:
                    return out

    def join(self, group: int) -> None:
        """Receive the multicast group `group`'s messages on this socket (use it for
        nothing else then: `request` would skip them as answers to no request)."""
        self._sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)

    def pending(self) -> list[Message]:
        """The messages queued on the socket now, without waiting. ENOBUFS (OSError)
        when the kernel dropped some because the socket's buffer was full: what they
        said is lost, and the queue goes on after the gap."""
        out: list[Message] = []
        while True:
            try:
                data = memoryview(self._sock.recv(1 << 17, socket.MSG_DONTWAIT))
            except BlockingIOError:
                return out
            out.extend(Message(typ, mflags, payload) for typ, mflags, _seq, payload in _walk(data))


class GenlSocket(NetlinkSocket):
    """A generic-netlink socket bound to one family, resolved by name."""

    def __init__(self, family: str) -> None:
        super().__init__(NETLINK_GENERIC)
        try:
            self.family_id, self.ops, self.groups = self._resolve(family)
        except OSError:
            self.close()
            raise
        self.family = family

    def _resolve(self, family: str) -> tuple[int, frozenset[int], dict[str, int]]:
        """The family's id, the commands this kernel implements (so a missing operation
        is told apart from a device that does not support an existing one) and its
        multicast groups by name."""
        body = GENL.pack(CTRL_CMD_GETFAMILY, 1, 0) + attr(CTRL_ATTR_FAMILY_NAME, cstr(family))
        replies = self.request(GENL_ID_CTRL, body, NLM_F_ACK, f"generic netlink family {family}")
        for m in replies:
            top = attrs(m.payload, GENL.size)
            fid = top.get(CTRL_ATTR_FAMILY_ID)
            if fid is not None:
                ops = top.get(CTRL_ATTR_OPS)
                ids = set()
                for _, op in attr_list(ops) if ops is not None else ():
                    op_id = attrs(op).get(CTRL_ATTR_OP_ID)
                    if op_id is not None:
                        ids.add(as_int(op_id))
                groups = {}
                mcast = top.get(CTRL_ATTR_MCAST_GROUPS)
                for _, grp in attr_list(mcast) if mcast is not None else ():
                    g = attrs(grp)
                    name, gid = g.get(CTRL_ATTR_MCAST_GRP_NAME), g.get(CTRL_ATTR_MCAST_GRP_ID)
                    if name is not None and gid is not None:
                        groups[as_str(name)] = as_int(gid)
                return as_int(fid[:2]), frozenset(ids), groups
        raise NetlinkError(errno.ENOENT, None, f"generic netlink family {family}")

    def genl(self, cmd: int, body: bytes = b"", flags: int = NLM_F_ACK, version: int = 1,
             what: str = "") -> list[dict[int, memoryview]]:
        """One genetlink command; each reply as its top-level attributes."""
        replies = self.request(self.family_id, GENL.pack(cmd, version, 0) + body, flags, what)
        return [attrs(m.payload, GENL.size) for m in replies]
