"""A small client for the kernel's `netdev` generic-netlink family (Linux 6.8+).

It answers the two questions nettop cannot get from procfs or sysfs: which NAPI instance
(and through it which IRQ) serves each hardware queue (`queue-get`, `napi-get`), and the
per-queue packet/byte counters that drivers export through `qstats-get` (Linux 6.9+).
Attribute numbers and names follow Documentation/netlink/specs/netdev.yaml; results are
plain dicts keyed by the spec's names with dashes turned into underscores. Enum values
(queue type) are given by their spec names, "rx" and "tx". Attributes this module does
not know yet (newer kernels) are kept as `attr_<number>` when they hold an integer.

One raw socket (nettop.kernel.netlink) is opened in the constructor and reused for every
request, because the sampler asks every tick and three dumps through pyroute2 cost more
than the rest of a tick; `close()` releases it.
"""

from __future__ import annotations

import errno
from typing import Any

from nettop.kernel import netlink as nl
from nettop.kernel.netlink import GenlSocket, NetlinkError

FAMILY = "netdev"

CMD_QUEUE_GET = 10
CMD_NAPI_GET = 11
CMD_QSTATS_GET = 12

QSTATS_SCOPE_QUEUE = 1
QUEUE_TYPES = ("rx", "tx")

# Attribute ids of each attribute set (netdev.yaml); the spec's "uint" type is 4 or 8
# bytes on the wire, so every integer is decoded by its length.
_QUEUE_ATTRS = {1: "id", 2: "ifindex", 3: "type", 4: "napi_id", 5: "dmabuf", 6: "io_uring", 7: "xsk"}
_NAPI_ATTRS = {
    1: "ifindex", 2: "id", 3: "irq", 4: "pid", 5: "defer_hard_irqs", 6: "gro_flush_timeout",
    7: "irq_suspend_timeout", 8: "threaded",
}
_QSTATS_NAMES = (
    "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_alloc_fail", "rx_hw_drops",
    "rx_hw_drop_overruns", "rx_csum_complete", "rx_csum_unnecessary", "rx_csum_none",
    "rx_csum_bad", "rx_hw_gro_packets", "rx_hw_gro_bytes", "rx_hw_gro_wire_packets",
    "rx_hw_gro_wire_bytes", "rx_hw_drop_ratelimits", "tx_hw_drops", "tx_hw_drop_errors",
    "tx_csum_none", "tx_needs_csum", "tx_hw_gso_packets", "tx_hw_gso_bytes",
    "tx_hw_gso_wire_packets", "tx_hw_gso_wire_bytes", "tx_hw_drop_ratelimits", "tx_stop",
    "tx_wake",
)
_QSTATS_ATTRS = {1: "ifindex", 2: "queue_type", 3: "queue_id", 4: "scope",
                 **{8 + i: name for i, name in enumerate(_QSTATS_NAMES)}}
_ENUMS = {"type": QUEUE_TYPES, "queue_type": QUEUE_TYPES}


class NetdevUnsupported(Exception):
    """The kernel has no `netdev` family, or not the operation asked for (EOPNOTSUPP)."""


def to_dict(attrs: dict[int, memoryview], names: dict[int, str]) -> dict[str, Any]:
    """Pure: one reply's attributes as a dict of the spec's names (see the module doc)."""
    out: dict[str, Any] = {}
    for code, raw in attrs.items():
        name = names.get(code)
        if len(raw) in (1, 2, 4, 8):
            value: Any = nl.as_int(raw)
        elif name is None:
            continue  # an unknown nested or binary attribute
        else:
            value = bytes(raw)
        if name is None:
            name = f"attr_{code}"
        else:
            choices = _ENUMS.get(name)
            if choices is not None and isinstance(value, int) and value < len(choices):
                value = choices[value]
        out[name] = value
    return out


class NetdevNetlink:
    """One open `netdev` genetlink socket; not thread-safe (one sampler thread owns it)."""

    def __init__(self) -> None:
        try:
            self._sock: GenlSocket | None = GenlSocket(FAMILY)
        except NetlinkError as exc:
            if exc.errno in (errno.ENOENT, errno.EOPNOTSUPP):
                raise NetdevUnsupported(
                    "the kernel has no netdev generic-netlink family (needs Linux 6.8+)") from exc
            raise

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> NetdevNetlink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- operations ----------------------------------------------------------------------

    def queues(self, ifindex: int | None = None) -> list[dict[str, Any]]:
        """Dump `queue-get`: id, type ("rx"/"tx"), ifindex, napi_id (when a NAPI serves it)."""
        body = nl.attr(2, nl.u32(ifindex)) if ifindex is not None else b""
        return self._dump(CMD_QUEUE_GET, body, _QUEUE_ATTRS, "queue-get")

    def napis(self, ifindex: int | None = None) -> list[dict[str, Any]]:
        """Dump `napi-get`: id, ifindex, irq (if the driver set it), pid (threaded NAPI), ..."""
        body = nl.attr(1, nl.u32(ifindex)) if ifindex is not None else b""
        return self._dump(CMD_NAPI_GET, body, _NAPI_ATTRS, "napi-get")

    def qstats(self, ifindex: int | None = None) -> list[dict[str, Any]]:
        """Dump `qstats-get` with scope=queue: one dict per queue that has counters.

        Keys: ifindex, queue_type ("rx"/"tx"), queue_id, and whichever counters the driver
        reports (rx_packets, rx_bytes, tx_packets, tx_bytes, rx_alloc_fail, tx_stop, ...).
        A device whose driver has no queue stats is simply absent (the kernel answers
        nothing for it); a kernel without the operation raises NetdevUnsupported.
        """
        body = nl.attr(4, nl.u32(QSTATS_SCOPE_QUEUE))
        if ifindex is not None:
            body = nl.attr(1, nl.u32(ifindex)) + body
        return self._dump(CMD_QSTATS_GET, body, _QSTATS_ATTRS, "qstats-get")

    def _dump(self, cmd: int, body: bytes, names: dict[int, str], op: str) -> list[dict[str, Any]]:
        if self._sock is None:
            raise OSError(errno.EBADF, "netdev genetlink socket is closed")
        if cmd not in self._sock.ops:
            raise NetdevUnsupported(f"netdev {op} is not supported by this kernel")
        try:
            replies = self._sock.genl(cmd, body, nl.NLM_F_DUMP, what=f"netdev {op}")
        except NetlinkError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENODEV):
                # the device has no such data (veth and qstats), or went away since it was listed
                return []
            raise
        return [to_dict(r, names) for r in replies]
