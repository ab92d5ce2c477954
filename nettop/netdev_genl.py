"""A small client for the kernel's `netdev` generic-netlink family (Linux 6.8+).

It answers the two questions nettop cannot get from procfs or sysfs: which NAPI instance
(and through it which IRQ) serves each hardware queue (`queue-get`, `napi-get`), and the
per-queue packet/byte counters that drivers export through `qstats-get` (Linux 6.9+).
Attribute numbers and names follow Documentation/netlink/specs/netdev.yaml; results are
plain dicts keyed by the spec's names with dashes turned into underscores. Enum values
(queue type) are given by their spec names, "rx" and "tx". Attributes this module does
not know yet (newer kernels) are kept as `attr_<number>` when they hold an integer.

One socket is opened in the constructor and reused for every request (the sampler asks
every tick); `close()` releases it.
"""

from __future__ import annotations

import errno
from typing import Any

from pyroute2.netlink import NLM_F_DUMP, NLM_F_REQUEST, genlmsg, nla_base_string
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.generic import GenericNetlinkSocket

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
_MAX_ATTR = 64


class NetdevUnsupported(Exception):
    """The kernel has no `netdev` family, or not the operation asked for (EOPNOTSUPP)."""


class _raw(nla_base_string):
    """An attribute kept as bytes; _to_dict turns integers and enums into values."""

    __slots__ = ()


class _netdev_msg(genlmsg):
    """Every attribute id decodes to raw bytes; names are applied per operation."""

    nla_map = tuple((f"A{i}", "_raw") for i in range(_MAX_ATTR))
    _raw = _raw


def _to_dict(msg: Any, names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in msg["attrs"]:
        code, raw = int(attr[0][1:]), attr[1]
        name = names.get(code)
        if len(raw) in (1, 2, 4, 8):
            value: Any = int.from_bytes(raw, "little")
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


def _u32(value: int) -> bytes:
    return int(value).to_bytes(4, "little")


class NetdevNetlink:
    """One open `netdev` genetlink socket; not thread-safe (one sampler thread owns it)."""

    def __init__(self) -> None:
        self._sock: GenericNetlinkSocket | None = GenericNetlinkSocket()
        try:
            self._sock.bind(FAMILY, _netdev_msg)
        except NetlinkError as exc:
            self.close()
            if exc.code in (errno.ENOENT, errno.EOPNOTSUPP):
                raise NetdevUnsupported(
                    "the kernel has no netdev generic-netlink family (needs Linux 6.8+)") from exc
            raise OSError(exc.code, f"netdev genetlink: {exc}") from exc
        except Exception:
            self.close()
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
        attrs = [("A2", _u32(ifindex))] if ifindex is not None else []
        return self._dump(CMD_QUEUE_GET, attrs, _QUEUE_ATTRS, "queue-get")

    def napis(self, ifindex: int | None = None) -> list[dict[str, Any]]:
        """Dump `napi-get`: id, ifindex, irq (if the driver set it), pid (threaded NAPI), ..."""
        attrs = [("A1", _u32(ifindex))] if ifindex is not None else []
        return self._dump(CMD_NAPI_GET, attrs, _NAPI_ATTRS, "napi-get")

    def qstats(self, ifindex: int | None = None) -> list[dict[str, Any]]:
        """Dump `qstats-get` with scope=queue: one dict per queue that has counters.

        Keys: ifindex, queue_type ("rx"/"tx"), queue_id, and whichever counters the driver
        reports (rx_packets, rx_bytes, tx_packets, tx_bytes, rx_alloc_fail, tx_stop, ...).
        A device whose driver has no queue stats is simply absent (the kernel answers
        nothing for it); a kernel without the operation raises NetdevUnsupported.
        """
        attrs = [("A4", _u32(QSTATS_SCOPE_QUEUE))]
        if ifindex is not None:
            attrs.insert(0, ("A1", _u32(ifindex)))
        return self._dump(CMD_QSTATS_GET, attrs, _QSTATS_ATTRS, "qstats-get")

    def _dump(self, cmd: int, attrs: list[tuple[str, bytes]], names: dict[int, str],
              op: str) -> list[dict[str, Any]]:
        if self._sock is None:
            raise OSError(errno.EBADF, "netdev genetlink socket is closed")
        msg = _netdev_msg()
        msg["cmd"] = cmd
        msg["version"] = 1
        msg["attrs"] = attrs
        try:
            replies = self._sock.nlm_request(
                msg, msg_type=self._sock.prid, msg_flags=NLM_F_REQUEST | NLM_F_DUMP)
        except NetlinkError as exc:
            if exc.code == errno.EOPNOTSUPP:
                raise NetdevUnsupported(f"netdev {op} is not supported by this kernel") from exc
            if exc.code == errno.ENODEV:
                return []  # the interface went away between listing it and asking
            raise OSError(exc.code, f"netdev {op}: {exc.args[-1]}") from exc
        return [_to_dict(r, names) for r in replies]
