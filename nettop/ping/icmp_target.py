"""ICMP echo probing of one target over one connected socket.

The socket is connected to the target, so the kernel hands it only packets from that
address (raw sockets) or with its identifier (datagram sockets, where the kernel sets
the echo identifier to the socket's port). The cookie check in `icmp.py` rejects the
rest: another nettop, an iputils ping, a reply to an old probe.
"""

from __future__ import annotations

import errno
import random
import select
import socket
import time
from typing import Callable

from nettop.ping import icmp, sockio
from nettop.ping.tracker import Tracker

Register = Callable[[int, int, Callable[[int], None]], None]
Unregister = Callable[[int], None]


def send_error(target: str, exc: OSError) -> str:
    """One line for a failed send, with the likely fix."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return f"{target}: {reason.lower()} (no route to it: check `ip route get`)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{target}: {reason.lower()} (blocked by a firewall or a broadcast address)"
    return f"{target}: send failed: {reason.lower()}"


class IcmpTarget:
    def __init__(self, tracker: Tracker, token: bytes, mode: str, size: int) -> None:
        self.tracker = tracker
        self.token = token
        self.mode = mode
        self.size = size
        self.sock: socket.socket | None = None
        self.raw = False
        self.family: int = socket.AF_INET
        self.ident = random.getrandbits(16)
        self.expect_ident = self.ident
        self.next_probe = random.getrandbits(32)  # a restart never reuses probe numbers

    def open(self, family: int, sockaddr: tuple, register: Register,
             unregister: Unregister) -> None:
        """Open and connect the socket; raises OSError (PermissionError with a hint)."""
        self.family = family
        sock, self.raw = sockio.open_icmp(family, self.mode)
        try:
            sockio.enable_timestamps(sock)
            sock.connect(sockaddr)
            if not self.raw:
                self.expect_ident = sock.getsockname()[1]
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
        packet = icmp.build_echo(self.family, self.ident, probe,
                                 icmp.make_payload(self.token, probe, time.time_ns(), self.size))
        # The fallback send time, read as close to the syscall as Python allows; the
        # kernel's TX stamp replaces it when it arrives.
        mono_ns = time.monotonic_ns()
        user_ns = time.time_ns()
        try:
            sock.send(packet)
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
        sock = self.sock
        while sock is not None:
            try:
                got = sockio.recv(sock)
            except OSError:
                return  # a pending socket error; the error queue says which
            if got is None:
                return
            parsed = icmp.parse_echo_reply(self.family, got.data,
                                           self.raw and self.family == socket.AF_INET)
            if parsed is None:
                continue
            ident, seq, payload = parsed
            cookie = icmp.read_cookie(payload, self.token)
            if ident != self.expect_ident or cookie is None or seq != cookie.probe & 0xFFFF:
                continue
            self.tracker.reply(cookie.probe, got.kernel_ns)

    def _drain_errors(self) -> None:
        sock = self.sock
        while sock is not None:
            try:
                got = sockio.recv(sock, errqueue=True)
            except OSError:
                return
            if got is None or got.ext_err is None:
                return
            cookie = icmp.find_cookie(got.data, self.token)
            ee = got.ext_err
            if ee.origin == sockio.SO_EE_ORIGIN_TIMESTAMPING:
                if cookie is not None and got.kernel_ns is not None:
                    self.tracker.tx_stamp(cookie.probe, got.kernel_ns)
                continue
            if ee.origin in (sockio.SO_EE_ORIGIN_ICMP, sockio.SO_EE_ORIGIN_ICMP6):
                what = icmp.describe_icmp_error(self.family, ee.type, ee.code)
            else:
                what = errno.errorcode.get(ee.errno, str(ee.errno))
            frm = f" (reported by {ee.offender})" if ee.offender else ""
            msg = f"{self.tracker.target}: {what}{frm}"
            if cookie is not None:
                self.tracker.lost(cookie.probe, msg)
            else:
                self.tracker.error = msg
