"""qdisc statistics per interface, mq's per-queue children included (rtnetlink tc dump).

A captured root has no qdisc data in sysfs; a sosreport or `nettop capture` keeps
`tc -s qdisc show`'s text, read instead (nettop/kernel/sos_text.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nettop.model.problems import Problem, from_oserror
from nettop.model.snapshot import QdiscStats
from nettop.kernel.sysroot import SysRoot

if TYPE_CHECKING:
    from nettop.kernel.rtnl import QdiscMsg, Rtnl


def read_qdiscs(root: SysRoot, rtnl: Rtnl | None, ifnames: dict[int, str]
                ) -> tuple[dict[str, tuple[QdiscStats, ...]], list[Problem]]:
    """qdiscs keyed by interface name; `ifnames` maps ifindex → name from the link dump."""
    if not root.live or rtnl is None:
        return {}, []
    try:
        msgs = rtnl.qdiscs()
    except OSError as exc:
        return {}, [from_oserror("netlink RTM_GETQDISC", exc)]
    return qdiscs_from_netlink(msgs, ifnames), []


def qdiscs_from_netlink(msgs: list[QdiscMsg], ifnames: dict[int, str]) -> dict[str, tuple[QdiscStats, ...]]:
    """Pure: tc dump messages into QdiscStats, root first, children in handle order."""
    from nettop.kernel.rtnl import tc_handle, tc_parent

    grouped: dict[str, list[QdiscStats]] = {}
    for m in msgs:
        name = ifnames.get(m.ifindex)
        if name is None:  # interface vanished between the two dumps
            continue
        grouped.setdefault(name, []).append(QdiscStats(
            ifname=name, kind=m.kind, handle=tc_handle(m.handle), parent=tc_parent(m.parent),
            bytes=m.bytes, packets=m.packets, drops=m.drops, overlimits=m.overlimits,
            requeues=m.requeues, backlog_bytes=m.backlog, backlog_packets=m.qlen,
        ))
    order = {"root": 0}
    return {
        name: tuple(sorted(rows, key=lambda q: (order.get(q.parent, 1), _num(q.parent))))
        for name, rows in grouped.items()
    }


def qdiscs_from_saved_tc(root: SysRoot, names: set[str]) -> dict[str, tuple[QdiscStats, ...]]:
    """A captured host's qdiscs from its saved `tc -s qdisc show` ({} when not saved);
    a qdisc printed without its Sent line (tc run without -s) is left out."""
    from nettop.kernel import sos

    grouped: dict[str, list[QdiscStats]] = {}
    for q in sos.tc_qdiscs(root.path)[0]:
        if q.ifname not in names or q.bytes is None or q.packets is None:
            continue
        grouped.setdefault(q.ifname, []).append(QdiscStats(
            ifname=q.ifname, kind=q.kind, handle=q.handle, parent=q.parent,
            bytes=q.bytes, packets=q.packets, drops=q.drops or 0,
            overlimits=q.overlimits or 0, requeues=q.requeues or 0,
            backlog_bytes=q.backlog_bytes or 0, backlog_packets=q.backlog_packets or 0,
        ))
    order = {"root": 0}
    return {
        name: tuple(sorted(rows, key=lambda q: (order.get(q.parent, 1), _num(q.parent))))
        for name, rows in grouped.items()
    }


def _num(parent: str) -> tuple[int, int]:
    try:
        major, minor = parent.split(":")
        return int(major or "0", 16), int(minor or "0", 16)
    except ValueError:
        return (1 << 32, 0)
