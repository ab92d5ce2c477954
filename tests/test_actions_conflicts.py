"""irqbalance's control socket: the ban command and its credentials, against a socket server run
here that speaks irqbalance's protocol (a real irqbalance would move this machine's IRQs);
tuned's active profile."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest

from nettop.actions.base import ActionError
from nettop.actions.conflicts import ban_command, parse_setup, send_ban, tuned_profile
from nettop.kernel.sysroot import SysRoot

# what irqbalance 1.9 answers to "setup" with IRQs 41 and 42 banned
SETUP_REPLY = b"SLEEP 10 IRQ 41 LOAD 0 DIFF 0 CLASS 2 IRQ 42 LOAD 0 DIFF 0 CLASS 2 BANNED 00000000"


class FakeIrqbalance:
    """Accepts connections like irqbalance's sock_handle: one recvmsg, uid 0 creds required."""

    def __init__(self, path: str) -> None:
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(1)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.got: list[tuple[bytes, tuple[int, int, int] | None]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for _ in range(2):
            conn, _ = self.srv.accept()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            msg, anc, _, _ = conn.recvmsg(500, socket.CMSG_SPACE(12))
            creds = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    creds = struct.unpack("iII", data[:12])
            self.got.append((msg, creds))
            if creds and creds[1] == 0 and msg.startswith(b"setup"):
                conn.sendall(SETUP_REPLY)
            conn.close()


def test_ban_command_replaces_the_list():
    assert ban_command([31, 30, 31]) == b"settings ban irqs 30 31"
    assert ban_command([]) == b"settings ban irqs NONE"


def test_setup_reply_lists_the_banned_irqs():
    assert parse_setup(SETUP_REPLY) == [41, 42]
    assert parse_setup(b"SLEEP 10 BANNED 00000000") == []


def test_ban_adds_to_irqbalances_list_with_root_credentials(tmp_path):
    fake = FakeIrqbalance(str(tmp_path / f"irqbalance{os.getpid()}.sock"))
    banned = send_ban(str(tmp_path / f"irqbalance{os.getpid()}.sock"), [30, 29])
    fake.thread.join(5)
    assert banned == [29, 30, 41, 42]
    me = (os.getpid(), os.getuid(), os.getgid())
    assert fake.got == [(b"setup", me), (b"settings ban irqs 29 30 41 42", me)]


def test_ban_to_a_dead_socket_says_what_to_do(tmp_path):
    with pytest.raises(ActionError, match="systemctl stop irqbalance"):
        send_ban(str(tmp_path / "irqbalance1.sock"), [1])


def test_tuned_profile_read_from_root(tmp_path):
    assert tuned_profile(SysRoot(str(tmp_path))) is None
    (tmp_path / "etc/tuned").mkdir(parents=True)
    (tmp_path / "etc/tuned/active_profile").write_text("network-latency\n")
    assert tuned_profile(SysRoot(str(tmp_path))) == "network-latency"
