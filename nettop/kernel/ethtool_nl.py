"""Coalescing, rings, channels and offloads through the kernel's ethtool netlink family.

The ioctl (nettop/kernel/ethtool.py) reads these fine, but a refused ioctl says only "Invalid
argument". Over netlink the kernel says what it refused and why (its extack: "cannot
modify an unsupported parameter", "requested channel count exceeds maximum"), and that
sentence is what an operator needs, so every change nettop makes here goes this way.

Values are dicts keyed by the ethtool CLI's names ("rx-usecs", "adaptive-rx", "rx",
"combined", "gro"); maxima come as "<name>-max". A GET answers only what the driver
supports: the kernel leaves out coalescing parameters a driver does not support (when
they are zero, as they then are), ring and channel kinds whose maximum is zero, and
offloads the driver cannot change (they are "[fixed]" in `ethtool -k`). The encoders and
decoders are pure functions of attribute dicts, so they are tested on their own.

Attribute numbers: include/uapi/linux/ethtool_netlink.h, Documentation/netlink/specs/ethtool.yaml.
"""

from __future__ import annotations

import errno
import socket
from typing import Any, Mapping

from nettop.kernel import netlink as nl
from nettop.kernel.netlink import GenlSocket, NetlinkError

FAMILY = "ethtool"

MSG_FEATURES_GET, MSG_FEATURES_SET = 11, 12
MSG_RINGS_GET, MSG_RINGS_SET = 15, 16
MSG_CHANNELS_GET, MSG_CHANNELS_SET = 17, 18
MSG_COALESCE_GET, MSG_COALESCE_SET = 19, 20

A_HEADER = 1  # every message's attribute 1
HEADER_DEV_INDEX, HEADER_DEV_NAME, HEADER_FLAGS = 1, 2, 3
MONITOR_GROUP = "monitor"
FLAG_OMIT_REPLY = 1 << 1

# attribute id -> (CLI name, is a u8 flag)
COALESCE: dict[int, tuple[str, bool]] = {
    2: ("rx-usecs", False), 3: ("rx-frames", False), 4: ("rx-usecs-irq", False),
    5: ("rx-frames-irq", False), 6: ("tx-usecs", False), 7: ("tx-frames", False),
    8: ("tx-usecs-irq", False), 9: ("tx-frames-irq", False), 10: ("stats-block-usecs", False),
    11: ("adaptive-rx", True), 12: ("adaptive-tx", True), 13: ("pkt-rate-low", False),
    14: ("rx-usecs-low", False), 15: ("rx-frames-low", False), 16: ("tx-usecs-low", False),
    17: ("tx-frames-low", False), 18: ("pkt-rate-high", False), 19: ("rx-usecs-high", False),
    20: ("rx-frames-high", False), 21: ("tx-usecs-high", False), 22: ("tx-frames-high", False),
    23: ("sample-interval", False), 24: ("cqe-mode-tx", True), 25: ("cqe-mode-rx", True),
    26: ("tx-aggr-max-bytes", False), 27: ("tx-aggr-max-frames", False),
    28: ("tx-aggr-time-usecs", False),
}
RINGS: dict[int, tuple[str, bool]] = {
    2: ("rx-max", False), 3: ("rx-mini-max", False), 4: ("rx-jumbo-max", False), 5: ("tx-max", False),
    6: ("rx", False), 7: ("rx-mini", False), 8: ("rx-jumbo", False), 9: ("tx", False),
    10: ("rx-buf-len", False), 11: ("tcp-data-split", True), 12: ("cqe-size", False),
    13: ("tx-push", True), 14: ("rx-push", True), 15: ("tx-push-buf-len", False),
    16: ("tx-push-buf-len-max", False), 17: ("hds-thresh", False), 18: ("hds-thresh-max", False),
}
CHANNELS: dict[int, tuple[str, bool]] = {
    2: ("rx-max", False), 3: ("tx-max", False), 4: ("other-max", False), 5: ("combined-max", False),
    6: ("rx", False), 7: ("tx", False), 8: ("other", False), 9: ("combined", False),
}
READ_ONLY = {"rx-max", "rx-mini-max", "rx-jumbo-max", "tx-max", "other-max", "combined-max",
             "tx-push-buf-len-max", "hds-thresh-max"}

# FEATURES: bitsets of the kernel's feature names; the CLI's short names stand for groups
FEATURES_HW, FEATURES_WANTED, FEATURES_ACTIVE, FEATURES_NOCHANGE = 2, 3, 4, 5
BITSET_NOMASK, BITSET_SIZE, BITSET_BITS = 1, 2, 3
BITS_BIT, BIT_INDEX, BIT_NAME, BIT_VALUE = 1, 1, 2, 3
OFFLOADS: dict[str, tuple[str, ...]] = {
    "gro": ("rx-gro",),
    "gso": ("tx-generic-segmentation",),
    "tso": ("tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation"),
    "lro": ("rx-lro",),
    "rx-gro-hw": ("rx-gro-hw",),
    "rx-gro-list": ("rx-gro-list",),
    "rxhash": ("rx-hashing",),
    "ntuple": ("rx-ntuple-filter",),
}

_TABLES = {"coalesce": (COALESCE, MSG_COALESCE_GET, MSG_COALESCE_SET),
           "rings": (RINGS, MSG_RINGS_GET, MSG_RINGS_SET),
           "channels": (CHANNELS, MSG_CHANNELS_GET, MSG_CHANNELS_SET)}


# --- pure encoders and decoders ----------------------------------------------------------


def header(ifname: str, flags: int = 0) -> bytes:
    parts = [nl.attr(HEADER_DEV_NAME, nl.cstr(ifname))]
    if flags:
        parts.append(nl.attr(HEADER_FLAGS, nl.u32(flags)))
    return nl.nest(A_HEADER, *parts)


def decode(reply: Mapping[int, memoryview], table: Mapping[int, tuple[str, bool]]) -> dict[str, Any]:
    """A GET reply's attributes as CLI names: ints, and bools for the u8 flags."""
    out: dict[str, Any] = {}
    for code, (name, flag) in table.items():
        raw = reply.get(code)
        if raw is not None:
            out[name] = bool(nl.as_int(raw)) if flag else nl.as_int(raw)
    return out


def encode(values: Mapping[str, Any], table: Mapping[int, tuple[str, bool]], what: str) -> bytes:
    """SET attributes for `values`; ValueError for a name the table does not have."""
    by_name = {name: (code, flag) for code, (name, flag) in table.items()}
    out = []
    for name, value in values.items():
        if name not in by_name or name in READ_ONLY:
            known = ", ".join(sorted(n for n in by_name if n not in READ_ONLY))
            raise ValueError(f"{what} has no settable parameter {name!r} (known: {known})")
        code, flag = by_name[name]
        out.append(nl.attr(code, nl.u8(int(bool(value))) if flag else nl.u32(int(value))))
    return b"".join(out)


def bitset_names(raw: memoryview) -> set[str]:
    """Names of the set bits of a verbose (named) bitset. With NOMASK every listed bit is
    set; with a mask (the kernel sends FEATURES_HW that way, listing every bit) a bit is
    set when it carries the VALUE flag."""
    top = nl.attrs(raw)
    bits = top.get(BITSET_BITS)
    nomask = BITSET_NOMASK in top
    names = set()
    for _, bit in nl.attr_list(bits) if bits is not None else ():
        b = nl.attrs(bit)
        name = b.get(BIT_NAME)
        if name is not None and (nomask or BIT_VALUE in b):
            names.add(nl.as_str(name))
    return names


def decode_features(reply: Mapping[int, memoryview]) -> dict[str, bool]:
    """Short offload names the driver lets change → whether they are on now.

    A group (tso) counts as on when its first changeable member is on, as `ethtool -k`
    shows tcp-segmentation-offload; a group with no changeable member is left out
    (changeable: in the hardware set and not in the never-change set)."""
    hw = _changeable(reply)
    active = bitset_names(reply[FEATURES_ACTIVE]) if FEATURES_ACTIVE in reply else set()
    out = {}
    for short, members in OFFLOADS.items():
        changeable = [m for m in members if m in hw]
        if changeable:
            out[short] = changeable[0] in active
    return out


def _changeable(reply: Mapping[int, memoryview]) -> set[str]:
    hw = bitset_names(reply[FEATURES_HW]) if FEATURES_HW in reply else set()
    return hw - (bitset_names(reply[FEATURES_NOCHANGE]) if FEATURES_NOCHANGE in reply else set())


def encode_features(values: Mapping[str, bool], hw: set[str]) -> bytes:
    """A WANTED bitset naming each changeable member of the groups asked for (the listed
    bits are the mask; a VALUE flag turns a bit on)."""
    bits = []
    for short, on in values.items():
        if short not in OFFLOADS:
            raise ValueError(f"unknown offload {short!r} (known: {', '.join(OFFLOADS)})")
        for member in OFFLOADS[short]:
            if member in hw:
                parts = [nl.attr(BIT_NAME, nl.cstr(member))]
                if on:
                    parts.append(nl.attr(BIT_VALUE, b""))
                bits.append(nl.nest(BITS_BIT, *parts))
    return nl.nest(FEATURES_WANTED, nl.nest(BITSET_BITS, *bits))


# distinct feature sets decoded and kept (a host has a few NIC models; each veth of a
# thousand containers has the same set), not one per interface: an interface's entry
# was ~7 kB, kept for every name seen until a thousand had been
_FEATURES_SEEN_MAX = 64


# --- the socket ----------------------------------------------------------------------------


def _family_socket() -> GenlSocket:
    """A socket of the ethtool genetlink family; EOPNOTSUPP on a kernel without it."""
    try:
        return GenlSocket(FAMILY)
    except NetlinkError as exc:
        if exc.errno == errno.ENOENT:
            raise NetlinkError(errno.EOPNOTSUPP, "this kernel has no ethtool netlink family (Linux 5.6+)",
                               "ethtool netlink") from None
        raise


class EthtoolNetlink:
    """One ethtool genetlink socket. Errors are `NetlinkError` (an OSError) with the
    kernel's extack text in `.extack`; a missing interface is ENODEV."""

    def __init__(self) -> None:
        self._sock = _family_socket()
        self._features_seen: dict[tuple[bytes | None, ...], dict[str, bool]] = {}

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> EthtoolNetlink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, cmd: int, ifname: str, what: str) -> dict[int, memoryview]:
        replies = self._sock.genl(cmd, header(ifname), nl.NLM_F_ACK, what=f"{what} {ifname}")
        if not replies:
            raise NetlinkError(errno.EPROTO, None, f"{what} {ifname}: the kernel sent no reply")
        return replies[0]

    def _get_table(self, what: str, ifname: str) -> dict[str, Any]:
        table, get, _ = _TABLES[what]
        return decode(self._get(get, ifname, what), table)

    def _set_table(self, what: str, ifname: str, values: Mapping[str, Any]) -> None:
        table, _, set_cmd = _TABLES[what]
        try:
            body = encode(values, table, what)
        except ValueError as exc:
            raise NetlinkError(errno.EINVAL, str(exc), f"{what} {ifname}") from None
        self._sock.genl(set_cmd, header(ifname) + body, nl.NLM_F_ACK, what=f"{what} {ifname}")

    def get_coalesce(self, ifname: str) -> dict[str, Any]:
        return self._get_table("coalesce", ifname)

    def set_coalesce(self, ifname: str, values: Mapping[str, Any]) -> None:
        self._set_table("coalesce", ifname, values)

    def get_rings(self, ifname: str) -> dict[str, Any]:
        return self._get_table("rings", ifname)

    def set_rings(self, ifname: str, values: Mapping[str, Any]) -> None:
        self._set_table("rings", ifname, values)

    def get_channels(self, ifname: str) -> dict[str, Any]:
        return self._get_table("channels", ifname)

    def set_channels(self, ifname: str, values: Mapping[str, Any]) -> None:
        self._set_table("channels", ifname, values)

    def get_features(self, ifname: str) -> dict[str, bool]:
        """The offloads as `decode_features` gives them. Asked every tick, so a change made
        anywhere shows at once; but the verbose bitsets name some 60 bits each and rarely
        change, so a reply whose bitsets equal one decoded before (this interface's last,
        or another interface's of the same model) reuses its decoding (three quarters of
        the call's time). Kept by content, not by name, so interfaces that come and go
        by the thousand cost nothing here."""
        reply = self._get(MSG_FEATURES_GET, ifname, "features")
        key = tuple(bytes(reply[a]) if a in reply else None for a in (FEATURES_HW, FEATURES_ACTIVE, FEATURES_NOCHANGE))
        out = self._features_seen.get(key)
        if out is None:
            out = decode_features(reply)
            if len(self._features_seen) >= _FEATURES_SEEN_MAX:
                self._features_seen.clear()
            self._features_seen[key] = out
        return dict(out)

    def set_features(self, ifname: str, values: Mapping[str, bool]) -> None:
        hw = _changeable(self._get(MSG_FEATURES_GET, ifname, "features"))
        fixed = [k for k in values if k in OFFLOADS and not any(m in hw for m in OFFLOADS[k])]
        if fixed:
            raise NetlinkError(errno.EOPNOTSUPP, f"{', '.join(fixed)} cannot be changed on this device "
                               "(fixed by the driver)", f"features {ifname}")
        try:
            body = encode_features(values, hw)
        except ValueError as exc:
            raise NetlinkError(errno.EINVAL, str(exc), f"features {ifname}") from None
        self._sock.genl(MSG_FEATURES_SET, header(ifname, FLAG_OMIT_REPLY) + body, nl.NLM_F_ACK,
                        what=f"features {ifname}")


class EthtoolMonitor:
    """The ethtool family's "monitor" multicast group: the kernel sends a notification
    naming the device whenever its coalescing, rings, channels, offloads (or link modes,
    WoL, ...) are changed, through netlink or the old ioctl alike (Linux 5.7+ for
    coalescing, rings and channels), and before the changing call returns. So a reader
    that drains this at the start of a tick knows which interfaces' ethtool settings
    changed since its last tick, whoever changed them, without asking every interface
    (each ask takes RTNL). Not thread-safe."""

    LOST: None = None  # `changed()`'s answer when notifications were dropped

    def __init__(self, rcvbuf: int | None = None) -> None:
        self._sock = _family_socket()
        try:
            group = self._sock.groups.get(MONITOR_GROUP)
            if group is None:
                raise NetlinkError(errno.EOPNOTSUPP, "the ethtool family has no monitor group", "ethtool monitor")
            if rcvbuf is not None:  # a test's small buffer, to make the kernel drop notifications
                self._sock._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self._sock.join(group)
        except OSError:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def changed(self) -> set[str] | None:
        """The names of the devices notified since the last call; None (LOST) when the
        kernel dropped notifications (the socket's buffer overflowed) or one named no
        device: then any interface may have changed. Other errors raise OSError."""
        try:
            messages = self._sock.pending()
        except OSError as exc:
            if exc.errno != errno.ENOBUFS:
                raise
            self._drain()
            return None
        names: set[str] = set()
        for m in messages:
            if m.type != self._sock.family_id:
                continue
            head = nl.attrs(m.payload, nl.GENL.size).get(A_HEADER)
            name = nl.attrs(head).get(HEADER_DEV_NAME) if head is not None else None
            if name is None:
                return None
            names.add(nl.as_str(name))
        return names

    def _drain(self) -> None:
        """Empty the queue after a loss; what it holds is covered by "all" anyway. The
        kernel may overflow the buffer again while we drain (a storm of changes): each
        ENOBUFS is one more gap in what "all" already covers, so drain on, a bounded
        number of times, rather than let the error close the monitor."""
        for _ in range(64):
            try:
                self._sock.pending()
                return
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise


__all__ = ["EthtoolMonitor", "EthtoolNetlink", "NetlinkError", "bitset_names", "decode", "decode_features", "encode",
           "encode_features", "header"]
