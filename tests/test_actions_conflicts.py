"""irqbalance's control socket: the ban command and its credentials, against a socket server run
here (a real irqbalance would move this machine's IRQs); tuned's active profile."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest

from nettop.actions.base import ActionError
from nettop.actions.conflicts import ban_command, send_ban, tuned_profile
from nettop.sysroot import SysRoot


def test_ban_command_replaces_the_list():
    assert ban_command([31, 30, 31]) == b"settings ban irqs 30 31"
    assert ban_command([]) == b"settings ban irqs NONE"


def test_ban_is_sent_with_root_credentials(tmp_path):
    path = str(tmp_path / f"irqbalance{os.getpid()}.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    got: dict = {}

    def serve() -> None:
        conn, _ = srv.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        msg, anc, _, _ = conn.recvmsg(4096, socket.CMSG_SPACE(12))
        got["msg"] = msg
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                got["creds"] = struct.unpack("iII", data[:12])
        conn.close()

    th = threading.Thread(target=serve)
    th.start()
    send_ban(path, [30, 29])
    th.join(5)
    srv.close()
    assert got["msg"] == b"settings ban irqs 29 30"
    assert got["creds"] == (os.getpid(), os.getuid(), os.getgid())


def test_ban_to_a_dead_socket_says_what_to_do(tmp_path):
    with pytest.raises(ActionError, match="systemctl stop irqbalance"):
        send_ban(str(tmp_path / "irqbalance1.sock"), [1])


def test_tuned_profile_read_from_root(tmp_path):
    assert tuned_profile(SysRoot(str(tmp_path))) is None
    (tmp_path / "etc/tuned").mkdir(parents=True)
    (tmp_path / "etc/tuned/active_profile").write_text("network-latency\n")
    assert tuned_profile(SysRoot(str(tmp_path))) == "network-latency"
