"""Who else changes what nettop changes: irqbalance, a tuned profile, and drift.

irqbalance rewrites smp_affinity every few seconds, so an IRQ nettop moves is moved back
unless irqbalance is told to leave it alone. Its control socket
(/run/irqbalance/irqbalance<PID>.sock, SOCK_STREAM, one command per connection) takes
"settings ban irqs N M ...", which *replaces* its runtime ban list, so the list it has is
read first with "setup" and the IRQs are added to it. It only obeys a sender whose
SCM_CREDENTIALS say uid 0, so the credentials go with every command. The alternative, stopping it
(`systemctl stop irqbalance`), is the operator's call and is only suggested.

A tuned profile re-applies its sysctls and IRQ settings on its own schedule; its name is
in /etc/tuned/active_profile. Drift (a value nettop set that is now different) comes
from `Tuner.drift()`, which compares the journal's read-back with the kernel.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Iterable

from nettop.actions.base import ActionError
from nettop.collectors.host_config import IrqbalanceCache, pid_from_sockets
from nettop.kernel.sysroot import SysRoot

TUNED_ACTIVE = "etc/tuned/active_profile"
SOCKET_DIRS = ("run/irqbalance", "var/run/irqbalance")


@dataclass(frozen=True, slots=True)
class Conflict:
    what: str  # "irqbalance", "tuned", "drift"
    message: str  # one line: what will happen and what to do


def ban_command(irqs: Iterable[int]) -> bytes:
    """The irqbalance socket command that makes its ban list exactly `irqs`."""
    ids = sorted(set(irqs))
    return ("settings ban irqs " + (" ".join(str(i) for i in ids) if ids else "NONE")).encode()


def irqbalance_socket(root: SysRoot, pid: int) -> str | None:
    for d in SOCKET_DIRS:
        path = root.join(f"{d}/irqbalance{pid}.sock")
        if os.path.exists(path):
            return path
    return None


def _request(path: str, command: bytes, reply: bool, timeout: float) -> bytes:
    """One command per connection, as irqbalance reads it: one recvmsg of at most 500 bytes."""
    creds = struct.pack("iII", os.getpid(), os.getuid(), os.getgid())
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendmsg([command], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
        if not reply:
            return b""
        chunks: list[bytes] = []
        while True:
            b = s.recv(65536)
            if not b:
                return b"".join(chunks)
            chunks.append(b)


def parse_setup(reply: bytes) -> list[int]:
    """Banned IRQs from irqbalance's "setup" reply: "SLEEP 10 IRQ 30 LOAD 0 DIFF 0 CLASS 0 ... BANNED 0"."""
    words = reply.decode("ascii", "replace").split()
    return sorted({int(words[i + 1]) for i, w in enumerate(words[:-1]) if w == "IRQ" and words[i + 1].isdigit()})


def send_ban(path: str, irqs: Iterable[int], timeout: float = 2.0) -> list[int]:
    """Add IRQs to irqbalance's ban list (read with "setup", then replaced); returns the new list."""
    try:
        current = parse_setup(_request(path, b"setup", True, timeout))
        banned = sorted(set(current) | set(irqs))
        command = ban_command(banned)
        if len(command) > 255:
            raise ActionError(f"too many IRQs to ban through irqbalance's socket ({len(banned)}); "
                              "stop it with `systemctl stop irqbalance` instead")
        _request(path, command, False, timeout)
    except OSError as exc:
        raise ActionError(f"cannot tell irqbalance ({path}) to leave the IRQs alone: {exc.strerror or exc}; "
                          "stop it with `systemctl stop irqbalance` instead", exc.errno) from None
    return banned


def ban_irqs(irqs: Iterable[int], root: SysRoot = SysRoot("/")) -> str:
    """Ban IRQs from the running irqbalance; returns the socket used. ActionError if none runs."""
    pid = pid_from_sockets(root)
    path = irqbalance_socket(root, pid) if pid is not None else None
    if path is None:
        raise ActionError("no running irqbalance with a control socket was found; nothing to ban")
    send_ban(path, irqs)
    return path


class IrqbalanceCheck:
    """"Does irqbalance run?" asked before every change that moves IRQs, from any thread.

    One per Tuner, so the answer is cached across changes: the pid found last is checked
    with one read, and a host without irqbalance is scanned (every /proc/PID/comm) at most
    once per `IrqbalanceCache.interval`. Reads go through `root`, so a test can stand a
    captured tree (and a control socket) in for the host.
    """

    def __init__(self, root: SysRoot, cache: IrqbalanceCache | None = None) -> None:
        self.root = root
        self._cache = cache or IrqbalanceCache()
        self._lock = threading.Lock()  # the cache is not thread-safe; tuning workers may overlap

    def running(self) -> bool:
        with self._lock:
            return self._cache.running(self.root)

    def ban(self, irqs: Iterable[int]) -> str:
        """Ban IRQs from the running irqbalance; the socket used, or ActionError."""
        return ban_irqs(irqs, self.root)


def tuned_profile(root: SysRoot = SysRoot("/")) -> str | None:
    try:
        name = root.read_line(TUNED_ACTIVE)
    except OSError:
        return None
    return name or None


def find_conflicts(kinds: Iterable[str], root: SysRoot = SysRoot("/"),
                   balancing: bool | None = None) -> list[Conflict]:
    """Warnings for a change touching settings of these kinds ("irq_affinity", "sysctl", ...);
    `balancing` is whether irqbalance runs when the caller knows already (None: look now)."""
    kinds = set(kinds)
    out = []
    if balancing is None and "irq_affinity" in kinds:
        balancing = IrqbalanceCache().running(root)
    if "irq_affinity" in kinds and balancing:
        out.append(Conflict("irqbalance", "irqbalance is running and will move these IRQs back within "
                                          "seconds: ban them (`nettop set irq ... --ban`) or stop it "
                                          "(`systemctl stop irqbalance`)"))
    profile = tuned_profile(root)
    if profile:
        out.append(Conflict("tuned", f"tuned profile {profile!r} is active and may re-apply its own "
                                     "values; switch it off with `tuned-adm off` to keep nettop's"))
    return out
