"""ICMP echo packets and the payload cookie that tells nettop's replies from others'.

Every raw ICMP socket on a host receives every echo reply, and on datagram sockets the
kernel replaces the echo identifier with the socket's port. So identifier and sequence
alone cannot say a reply is ours: each probe carries a cookie (the prober's random
64-bit token, a 64-bit probe number that never wraps, the send time) and a reply counts
only when identifier, sequence and cookie all match. Pure functions, no sockets.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

ICMP_ECHO_REPLY = 0
ICMP_DEST_UNREACH = 3
ICMP_ECHO_REQUEST = 8
ICMP_TIME_EXCEEDED = 11
ICMP6_DEST_UNREACH = 1
ICMP6_TIME_EXCEEDED = 3
ICMP6_ECHO_REQUEST = 128
ICMP6_ECHO_REPLY = 129

_HDR = struct.Struct("!BBHHH")  # type, code, checksum, identifier, sequence
_COOKIE = struct.Struct("!8sQQ")  # token, probe number, send time (CLOCK_REALTIME ns)
COOKIE_LEN = _COOKIE.size
DEFAULT_PAYLOAD = 56  # iputils ping's default, so both tools send packets of one size


@dataclass(frozen=True, slots=True)
class Cookie:
    token: bytes
    probe: int
    sent_ns: int


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of `data`."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def make_payload(token: bytes, probe: int, sent_ns: int, size: int = DEFAULT_PAYLOAD) -> bytes:
    """Cookie followed by a fixed pattern up to `size` bytes (at least the cookie)."""
    head = _COOKIE.pack(token, probe, sent_ns)
    pad = max(0, size - len(head))
    return head + bytes(i & 0xFF for i in range(pad))


def build_echo(family: int, ident: int, seq: int, payload: bytes) -> bytes:
    """An echo request. IPv4 carries its checksum; for ICMPv6 the kernel computes it."""
    if family == socket.AF_INET6:
        return _HDR.pack(ICMP6_ECHO_REQUEST, 0, 0, ident, seq & 0xFFFF) + payload
    hdr = _HDR.pack(ICMP_ECHO_REQUEST, 0, 0, ident, seq & 0xFFFF)
    csum = checksum(hdr + payload)
    return _HDR.pack(ICMP_ECHO_REQUEST, 0, csum, ident, seq & 0xFFFF) + payload


def parse_echo_reply(family: int, data: bytes, has_ip_header: bool
                     ) -> tuple[int, int, bytes] | None:
    """(identifier, sequence, payload) of an echo reply, None for anything else.

    `has_ip_header` is True for IPv4 raw sockets, which receive the IP header too.
    """
    if has_ip_header:
        if len(data) < 20 or data[0] >> 4 != 4:
            return None
        data = data[(data[0] & 0x0F) * 4:]
    if len(data) < _HDR.size:
        return None
    kind, code, _csum, ident, seq = _HDR.unpack_from(data)
    want = ICMP6_ECHO_REPLY if family == socket.AF_INET6 else ICMP_ECHO_REPLY
    if kind != want or code != 0:
        return None
    return ident, seq, data[_HDR.size:]


def read_cookie(payload: bytes, token: bytes) -> Cookie | None:
    """The cookie at the start of an echo payload, if it carries `token`."""
    if len(payload) < COOKIE_LEN or payload[:8] != token:
        return None
    tok, probe, sent_ns = _COOKIE.unpack_from(payload)
    return Cookie(tok, probe, sent_ns)


def find_cookie(data: bytes, token: bytes) -> Cookie | None:
    """The cookie anywhere in `data`: the kernel returns a sent packet or the packet an
    ICMP error quotes with headers whose length depends on socket kind and family."""
    at = data.find(token)
    if at < 0 or len(data) - at < COOKIE_LEN:
        return None
    tok, probe, sent_ns = _COOKIE.unpack_from(data, at)
    return Cookie(tok, probe, sent_ns)


_UNREACH4 = {0: "network unreachable", 1: "host unreachable", 2: "protocol unreachable",
             3: "port unreachable", 4: "fragmentation needed", 9: "network prohibited",
             10: "host prohibited", 13: "communication administratively prohibited"}
_UNREACH6 = {0: "no route to destination", 1: "communication administratively prohibited",
             3: "address unreachable", 4: "port unreachable", 5: "source address failed policy",
             6: "reject route to destination"}


def describe_icmp_error(family: int, kind: int, code: int) -> str:
    """Words for an ICMP error type/code as ping prints them."""
    if family == socket.AF_INET6:
        if kind == ICMP6_DEST_UNREACH:
            return _UNREACH6.get(code, f"destination unreachable (code {code})")
        if kind == ICMP6_TIME_EXCEEDED:
            return "time to live exceeded"
        return f"ICMPv6 error type {kind} code {code}"
    if kind == ICMP_DEST_UNREACH:
        return _UNREACH4.get(code, f"destination unreachable (code {code})")
    if kind == ICMP_TIME_EXCEEDED:
        return "time to live exceeded"
    return f"ICMP error type {kind} code {code}"


def is_port_unreachable(family: int, kind: int, code: int) -> bool:
    if family == socket.AF_INET6:
        return kind == ICMP6_DEST_UNREACH and code == 4
    return kind == ICMP_DEST_UNREACH and code == 3
