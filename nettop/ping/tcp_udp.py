"""TCP-connect and UDP probes, for targets whose path drops ICMP echo.

TCP: a non-blocking connect per probe; the RTT is the time to the SYN-ACK, which the
kernel measured itself (tcp_info.tcpi_rtt holds exactly that first sample, in µs). A
refused connection (RST) also answers, and its RTT is timed by this thread. The socket
is closed with an RST (SO_LINGER 0) so probing leaves no TIME_WAIT behind.

UDP: one connected socket per target; any datagram back from the target answers the
oldest probe (or the probe whose cookie it echoes), and an ICMP port unreachable is an
answer too: both carry kernel receive stamps. Hosts rate-limit port unreachables
(Linux: a burst of 6, then 1/s per source, net.ipv4.icmp_ratelimit), so probing a
closed UDP port faster than that shows loss that is the target's doing.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import time
from typing import Callable

from nettop.ping import icmp, sockio
from nettop.ping.icmp_target import send_error
from nettop.ping.tracker import Tracker

Register = Callable[[int, int, Callable[[int], None]], None]
Unregister = Callable[[int], None]
_TCPI_RTT = struct.Struct("=I")
_TCPI_RTT_OFFSET = 68  # struct tcp_info: 8 bytes of u8 fields, then tcpi_rtt is u32 #15
_LINGER_RST = struct.pack("ii", 1, 0)


class TcpTarget:
    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.family: int = socket.AF_INET
        self.sockaddr: tuple = ()
        self.next_probe = 0
        self._socks: dict[int, socket.socket] = {}  # probe -> its connecting socket
        self._register: Register | None = None
        self._unregister: Unregister | None = None

    def open(self, family: int, sockaddr: tuple, register: Register,
             unregister: Unregister) -> None:
        self.family, self.sockaddr = family, sockaddr
        self._register, self._unregister = register, unregister

    def send(self) -> None:
        if self._register is None:
            return
        probe = self.next_probe
        self.next_probe += 1
        try:
            sock = socket.socket(self.family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK
                                 | socket.SOCK_CLOEXEC)
        except OSError as exc:
            self.tracker.error = f"{self.tracker.target}: cannot open a TCP socket: {exc.strerror}"
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        user_ns, mono_ns = time.time_ns(), time.monotonic_ns()
        rc = sock.connect_ex(self.sockaddr)
        self.tracker.sent(probe, user_ns, mono_ns)
        if rc not in (0, errno.EINPROGRESS):
            sock.close()
            if rc == errno.ECONNREFUSED:  # refused before connect() returned: still an answer
                self.tracker.reply(probe, None, time.monotonic_ns() - mono_ns)
                self.tracker.error = f"{self.tracker.target}: connection refused"
                return
            self.tracker.lost(probe, send_error(self.tracker.target, OSError(rc, _strerror(rc))))
            return
        self._socks[probe] = sock

        def connected(_events: int, p: int = probe) -> None:
            self._done(p)

        self._register(sock.fileno(), select.EPOLLOUT, connected)

    def _done(self, probe: int) -> None:
        sock = self._socks.pop(probe, None)
        if sock is None:
            return
        now_ns = time.monotonic_ns()
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        rtt_ns: int | None = None
        if err == 0:
            try:
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
                us = _TCPI_RTT.unpack_from(info, _TCPI_RTT_OFFSET)[0]
                rtt_ns = us * 1000 if us else None
            except (OSError, struct.error):
                rtt_ns = None
        self._close(sock)
        p = self.tracker.pending.get(probe)
        if err in (0, errno.ECONNREFUSED):
            if rtt_ns is None and p is not None:
                rtt_ns = now_ns - p.mono_ns
            if self.tracker.reply(probe, None, rtt_ns) and err:
                self.tracker.error = (f"{self.tracker.target}: connection refused "
                                      "(RTT measured to the RST)")
        else:
            self.tracker.lost(probe, send_error(self.tracker.target, OSError(err, _strerror(err))))

    def expired(self, probes: list[int]) -> None:
        for probe in probes:
            sock = self._socks.pop(probe, None)
            if sock is not None:
                self._close(sock)

    def close(self) -> None:
        for sock in self._socks.values():
            self._close(sock)
        self._socks.clear()

    def _close(self, sock: socket.socket) -> None:
        if self._unregister is not None:
            self._unregister(sock.fileno())
        sock.close()


class UdpTarget:
    def __init__(self, tracker: Tracker, token: bytes, size: int) -> None:
        self.tracker = tracker
        self.token = token
        self.size = size
        self.sock: socket.socket | None = None
        self.family: int = socket.AF_INET
        self.next_probe = 0

    def open(self, family: int, sockaddr: tuple, register: Register,
             unregister: Unregister) -> None:
        self.family = family
        sock = socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK
                             | socket.SOCK_CLOEXEC)
        try:
            sockio.enable_timestamps(sock)
            sock.connect(sockaddr)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        register(sock.fileno(), select.EPOLLIN | select.EPOLLERR, self._on_event)

    def send(self) -> None:
        sock = self.sock
        if sock is None:
            return
        self._drain_errors()
        probe = self.next_probe
        self.next_probe += 1
        payload = icmp.make_payload(self.token, probe, time.time_ns(), self.size)
        mono_ns = time.monotonic_ns()
        user_ns = time.time_ns()
        try:
            sock.send(payload)
        except OSError as exc:
            self.tracker.sent(probe, user_ns, mono_ns)
            self.tracker.lost(probe, send_error(self.tracker.target, exc))
            return
        self.tracker.sent(probe, user_ns, mono_ns)

    def expired(self, probes: list[int]) -> None:
        """Nothing to release: probes share the one socket."""

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _on_event(self, events: int) -> None:
        if events & select.EPOLLERR:
            self._drain_errors()
        if events & select.EPOLLIN:
            self._drain_replies()

    def _drain_replies(self) -> None:
        while self.sock is not None:
            try:
                got = sockio.recv(self.sock)
            except OSError:
                return  # ECONNREFUSED reported through the error queue as well
            if got is None:
                return
            cookie = icmp.find_cookie(got.data, self.token)
            probe = cookie.probe if cookie else next(iter(self.tracker.pending), None)
            if probe is not None:
                self.tracker.reply(probe, got.kernel_ns)

    def _drain_errors(self) -> None:
        while self.sock is not None:
            try:
                got = sockio.recv(self.sock, errqueue=True)
            except OSError:
                return
            if got is None or got.ext_err is None:
                return
            ee = got.ext_err
            cookie = icmp.find_cookie(got.data, self.token)
            if ee.origin == sockio.SO_EE_ORIGIN_TIMESTAMPING:
                if cookie is not None and got.kernel_ns is not None:
                    self.tracker.tx_stamp(cookie.probe, got.kernel_ns)
                continue
            if ee.origin in (sockio.SO_EE_ORIGIN_ICMP, sockio.SO_EE_ORIGIN_ICMP6):
                if icmp.is_port_unreachable(self.family, ee.type, ee.code):
                    if cookie is not None:
                        self.tracker.reply(cookie.probe, got.kernel_ns)
                    continue
                what = icmp.describe_icmp_error(self.family, ee.type, ee.code)
            else:
                what = _strerror(ee.errno)
            frm = f" (reported by {ee.offender})" if ee.offender else ""
            msg = f"{self.tracker.target}: {what}{frm}"
            if cookie is not None:
                self.tracker.lost(cookie.probe, msg)
            else:
                self.tracker.error = msg


def _strerror(err: int) -> str:
    return os.strerror(err)
