"""Interface-wide link settings: txqueuelen and MTU.

MTU is checked against the device's own limits before the write (`IFLA_MIN_MTU` /
`IFLA_MAX_MTU` over netlink), so "veth takes 68 to 65535" is said up front instead of a
bare EINVAL. Changing the MTU may reset the link on real NICs (rings are reallocated),
so it asks for confirmation; txqueuelen only resizes the qdisc's limit and does not.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

from nettop.actions.base import (ActionError, Setting, Value, need_iface, parse_int, read_file,
                                 register, valid_ifname, write_file)


def mtu_limits(ifname: str) -> tuple[int, int]:
    """(min_mtu, max_mtu) the driver reports; a wide default when netlink gives none."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        links = ipr.link("get", ifname=ifname)
    if not links:
        return 68, 65535
    msg = links[0]
    lo = msg.get_attr("IFLA_MIN_MTU")
    hi = msg.get_attr("IFLA_MAX_MTU")
    return (lo if lo is not None else 68), (hi if hi else 65535)


@dataclass(frozen=True, slots=True)
class _LinkFile(Setting):
    value_types = (int,)
    ifname: str
    fname = ""

    @property
    def key(self) -> str:
        return f"{self.fname} {self.ifname}"

    @property
    def path(self) -> str:
        return self.root.join(f"sys/class/net/{self.ifname}/{self.fname}")

    def validate(self) -> None:
        valid_ifname(self.ifname)

    def read(self) -> Value:
        return int(read_file(self.path))

    def write(self, value: Value) -> None:
        write_file(self.path, str(int(value)))

    def explain(self, exc: OSError) -> str:
        if exc.errno in (errno.ENOENT, errno.ENODEV):
            return f"{self.key}: interface {self.ifname} vanished ({errno.errorcode[exc.errno]})"
        return super(_LinkFile, self).explain(exc)


@register
@dataclass(frozen=True, slots=True)
class TxQueueLen(_LinkFile):
    kind = "txqueuelen"
    fname = "tx_queue_len"

    @property
    def key(self) -> str:
        return f"txqueuelen {self.ifname}"

    def normalize(self, value: Value) -> Value:
        need_iface(self.ifname)
        return parse_int(self.key, value, 0, 2**32 - 1)


@register
@dataclass(frozen=True, slots=True)
class Mtu(_LinkFile):
    kind = "mtu"
    fname = "mtu"

    def normalize(self, value: Value) -> Value:
        need_iface(self.ifname)
        lo, hi = mtu_limits(self.ifname)
        try:
            return parse_int(self.key, value, lo, hi)
        except ActionError as exc:
            raise ActionError(f"{exc} (the limits {self.ifname}'s driver reports)", exc.errno) from None

    def confirm_reason(self, before: Value, value: Value) -> str | None:
        if before == value:
            return None
        return "changing the MTU may reset the link and drops packets in flight"

    def explain(self, exc: OSError) -> str:
        if exc.errno == errno.EINVAL:
            return f"{self.key}: the driver refused this MTU (EINVAL); check the limits in `ip -d link show {self.ifname}`"
        if exc.errno == errno.EBUSY:
            return f"{self.key}: the device is busy (EBUSY), e.g. an XDP program needs a smaller MTU; detach it first"
        return _LinkFile.explain(self, exc)
