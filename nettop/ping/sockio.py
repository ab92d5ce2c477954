"""Sockets for probing, kernel timestamps and the error queue.

Receive times come from the kernel (SO_TIMESTAMPING, the software RX stamp taken when
the packet entered the stack), so it does not matter when this thread gets to read
the reply. The send time is read from CLOCK_REALTIME just before the send syscall,
as iputils ping does, so both tools measure the same span. The kernel's TX_SCHED stamp
(taken when the packet reached the device queue) is requested as well: when it lies
far after the clock read, the thread stalled in between (descheduled, waiting for the
GIL) and the tracker starts the RTT at the kernel stamp instead. ICMP errors
(unreachable, port unreachable) and the TX stamps come back on the socket's error
queue (IP_RECVERR), read with recvmsg(MSG_ERRQUEUE).
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

SO_TIMESTAMPING = 37  # == SCM_TIMESTAMPING, the "old" variant: native struct timespec
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_TX_SCHED = 1 << 8
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
IP_RECVERR = 11
IPV6_RECVERR = 25
SOL_RAW = 255
ICMP_FILTER = 1
ICMP6_FILTER = 1
SO_EE_ORIGIN_LOCAL = 1
SO_EE_ORIGIN_ICMP = 2
SO_EE_ORIGIN_ICMP6 = 3
SO_EE_ORIGIN_TIMESTAMPING = 4

_TIMESPECS = struct.Struct("@3q3q")  # scm_timestamping: three struct timespec (64-bit)
_EE = struct.Struct("=IBBBBII")  # sock_extended_err
ANC_SIZE = 512
RX_FLAGS = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
TX_FLAGS = SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_SOFTWARE


@dataclass(frozen=True, slots=True)
class ExtErr:
    """A sock_extended_err from the error queue."""

    errno: int
    origin: int
    type: int
    code: int
    offender: str | None  # the host that sent the ICMP error


@dataclass(frozen=True, slots=True)
class Received:
    data: bytes
    kernel_ns: int | None  # the kernel's software timestamp, CLOCK_REALTIME ns
    ext_err: ExtErr | None = None


def _sockaddr_ip(raw: bytes) -> str | None:
    if len(raw) >= 8 and struct.unpack_from("=H", raw)[0] == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[4:8])
    if len(raw) >= 24 and struct.unpack_from("=H", raw)[0] == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[8:24])
    return None


def parse_ancillary(ancdata: list[tuple[int, int, bytes]]) -> tuple[int | None, ExtErr | None]:
    """(software timestamp ns, extended error) from recvmsg's ancillary data."""
    stamp = None
    err = None
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
            sec, nsec = struct.unpack_from("@qq", data)
            if sec or nsec:
                stamp = sec * 1_000_000_000 + nsec
        elif ((level, kind) in ((socket.SOL_IP, IP_RECVERR), (socket.IPPROTO_IPV6, IPV6_RECVERR))
              and len(data) >= _EE.size):
            eno, origin, etype, ecode, _pad, _info, _data = _EE.unpack_from(data)
            err = ExtErr(eno, origin, etype, ecode, _sockaddr_ip(data[_EE.size:]))
    return stamp, err


def enable_timestamps(sock: socket.socket, tx: bool = True) -> None:
    """Ask for kernel RX (and TX_SCHED) software timestamps and queued errors."""
    flags = RX_FLAGS | (TX_FLAGS if tx else 0)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVERR, 1)
    else:
        sock.setsockopt(socket.SOL_IP, IP_RECVERR, 1)


def recv(sock: socket.socket, errqueue: bool = False) -> Received | None:
    """One datagram (or error-queue entry); None when there is nothing to read."""
    try:
        data, anc, _flags, _addr = sock.recvmsg(
            65535, ANC_SIZE, socket.MSG_DONTWAIT | (socket.MSG_ERRQUEUE if errqueue else 0))
    except (BlockingIOError, InterruptedError):
        return None
    stamp, err = parse_ancillary(anc)
    return Received(data, stamp, err)


def ping_group_hint() -> str:
    """One line on how to allow unprivileged ICMP datagram sockets for this user."""
    gid = os.getgid()
    try:
        with open("/proc/sys/net/ipv4/ping_group_range") as f:
            current = " ".join(f.read().split())
    except OSError:
        current = "?"
    return (f"cannot open an ICMP socket: raw sockets need root or CAP_NET_RAW, and group "
            f"{gid} is outside net.ipv4.ping_group_range ({current}); allow it with "
            f"`sysctl -w net.ipv4.ping_group_range=\"0 2147483647\"`")


def open_icmp(family: int, mode: str) -> tuple[socket.socket, bool]:
    """An ICMP socket and whether it is raw. `mode` is "auto", "raw" or "dgram".

    "auto" tries raw first (needs CAP_NET_RAW), then the unprivileged datagram socket.
    Raises PermissionError with the ping_group_range hint when neither is allowed.
    """
    proto = socket.IPPROTO_ICMPV6 if family == socket.AF_INET6 else socket.IPPROTO_ICMP
    kinds = {"auto": (socket.SOCK_RAW, socket.SOCK_DGRAM), "raw": (socket.SOCK_RAW,),
             "dgram": (socket.SOCK_DGRAM,)}[mode]
    last: OSError | None = None
    for kind in kinds:
        try:
            sock = socket.socket(family, kind | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, proto)
        except PermissionError as exc:
            last = exc
            continue
        if kind == socket.SOCK_RAW:
            _only_echo_replies(sock, family)
        return sock, kind == socket.SOCK_RAW
    if mode == "raw":
        raise PermissionError(f"cannot open a raw ICMP socket: {last.strerror if last else ''}"
                              " (run as root or give CAP_NET_RAW)")
    raise PermissionError(ping_group_hint())


def _only_echo_replies(sock: socket.socket, family: int) -> None:
    """Let the kernel drop every ICMP type but echo reply before it reaches us: a raw
    socket otherwise gets a copy of all ICMP the host receives. Errors still reach us
    through IP_RECVERR."""
    if family == socket.AF_INET6:
        blocked = [0xFFFFFFFF] * 8
        blocked[129 >> 5] &= ~(1 << (129 & 31))
        sock.setsockopt(socket.IPPROTO_ICMPV6, ICMP6_FILTER, struct.pack("=8I", *blocked))
    else:
        sock.setsockopt(SOL_RAW, ICMP_FILTER, struct.pack("=I", 0xFFFFFFFF & ~(1 << 0)))
