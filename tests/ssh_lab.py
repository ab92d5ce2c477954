"""The SSH lab: a real sshd in one namespace, the real ssh client in another, a veth between.

Issue 26's tests need what an operator has: a session whose own packets cross the
interface nettop changes. The server namespace plays the tuned host (its veth end has 4
queues), the client namespace plays the operator's laptop. sshd runs with a config,
host key, authorized key and port of its own under the test's tmp directory; nothing of
the host's ssh is read or touched (the host's sshd is never started). Everything is
removed on exit, even when a test fails; leftovers of a killed run are swept by
`lab.sweep_leftovers` (same name prefix).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import lab

SSHD = "/usr/sbin/sshd"
PORT = 2222
_counter = itertools.count(1)


def can_build() -> str | None:
    reason = lab.can_build_lab()
    if reason:
        return reason
    if not os.path.exists(SSHD):
        return "the SSH lab needs Debian's openssh-server (`apt-get install openssh-server`)"
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        return "the SSH lab needs openssh-client"
    return None


@dataclass
class SshLab:
    server_ns: str
    client_ns: str
    server_if: str  # the server's veth end: carries the session
    client_if: str
    server_ip: str
    client_ip: str
    home: Path  # keys, config, logs
    procs: list[subprocess.Popen] = field(default_factory=list)

    def in_server(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.server_ns, *argv]

    def in_client(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.client_ns, *argv]

    def ssh_argv(self, remote: list[str], tty: bool = True) -> list[str]:
        """The client's argv for running `remote` (words, quoted by ssh's rules: no
        spaces or shell characters in them) on the server, inside the client namespace."""
        opts = ["-i", str(self.home / "id_ed25519"), "-p", str(PORT), "-F", "/dev/null",
                "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={self.home / 'known_hosts'}",
                "-o", "BatchMode=yes", "-o", "ServerAliveInterval=0", "-o", "ConnectTimeout=10",
                "-o", "LogLevel=ERROR"]
        return self.in_client(["ssh", *(["-tt"] if tty else ["-T"]), *opts, f"root@{self.server_ip}", *remote])

    def spawn(self, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, **kw)
        self.procs.append(p)
        return p

    def server_run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return lab.run(self.in_server(argv), check=check)

    def root_qdisc(self) -> str:
        out = self.server_run(["tc", "qdisc", "show", "dev", "eth1", "root"]).stdout.split()
        return out[1] if len(out) > 1 else "?"

    def teardown(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(Exception):
                p.communicate(timeout=5)
        for ns in (self.server_ns, self.client_ns):
            lab._kill_ns_pids(ns)
            lab.run(["ip", "netns", "del", ns], check=False)


def _write_config(home: Path, server_ip: str) -> Path:
    lab.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / "host_ed25519")])
    lab.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / "id_ed25519")])
    (home / "authorized_keys").write_text((home / "id_ed25519.pub").read_text())
    os.chmod(home / "authorized_keys", 0o600)
    cfg = home / "sshd_config"
    cfg.write_text("\n".join([
        f"ListenAddress {server_ip}:{PORT}",
        f"HostKey {home / 'host_ed25519'}",
        f"AuthorizedKeysFile {home / 'authorized_keys'}",
        f"PidFile {home / 'sshd.pid'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "PrintMotd no",
        "PrintLastLog no",
        "ClientAliveInterval 0",
        "TCPKeepAlive no",  # a stalled path must look stalled, not dead, to both ends
        "AcceptEnv NETTOP_*",
        "Subsystem sftp internal-sftp",
    ]) + "\n")
    return cfg


@contextlib.contextmanager
def ssh_lab(tmp: Path) -> Iterator[SshLab]:
    reason = can_build()
    if reason:
        raise RuntimeError(reason)
    n = next(_counter)
    pid = os.getpid()
    server_ns, client_ns = f"{lab.PREFIX}-{pid}-{900 + n}", f"{lab.PREFIX}-{pid}-{950 + n}"
    subnet = (pid * 7 + 900 + n) % 16384
    third, fourth = divmod(subnet * 4, 256)
    base = f"198.{18 + third // 256}.{third % 256}"
    server_ip, client_ip = f"{base}.{fourth + 1}", f"{base}.{fourth + 2}"
    home = tmp / "ssh"
    home.mkdir(mode=0o700)
    sl = SshLab(server_ns, client_ns, "eth1", "eth1", server_ip, client_ip, home)
    try:
        lab.run(["ip", "netns", "add", server_ns])
        lab.run(["ip", "netns", "add", client_ns])
        lab.run(["ip", "link", "add", "sshlabs", "netns", server_ns, "numtxqueues", "4", "numrxqueues", "4",
                 "type", "veth", "peer", "name", "sshlabc", "netns", client_ns])
        for ns, old, ip in ((server_ns, "sshlabs", server_ip), (client_ns, "sshlabc", client_ip)):
            ex = ["ip", "netns", "exec", ns]
            lab.run([*ex, "ip", "link", "set", old, "name", "eth1"])
            lab.run([*ex, "ip", "addr", "add", f"{ip}/30", "dev", "eth1"])
            lab.run([*ex, "ip", "link", "set", "eth1", "up"])
            lab.run([*ex, "ip", "link", "set", "lo", "up"])
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        cfg = _write_config(home, server_ip)
        sshd = sl.spawn(sl.in_server([SSHD, "-D", "-e", "-f", str(cfg)]),
                        stdout=subprocess.DEVNULL, stderr=open(home / "sshd.log", "w"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if sl.server_run(["ss", "-ltnH", f"sport = :{PORT}"], check=False).stdout.strip():
                break
            if sshd.poll() is not None:
                raise RuntimeError(f"sshd exited: {(home / 'sshd.log').read_text()}")
            time.sleep(0.05)
        else:
            raise RuntimeError("sshd did not listen within 10 s")
        yield sl
    finally:
        sl.teardown()
