"""Byte queue limits of each tx queue: how many bytes the driver may hold in its ring.

BQL (`queues/tx-N/byte_queue_limits/`) caps the bytes queued to the NIC so that packets
wait in the qdisc, where they can be scheduled and dropped fairly, instead of in the
hardware ring. `limit` is the current dynamic limit, `limit_min`/`limit_max` bound it,
and `inflight` is what sits in the ring now; a limit pinned at `limit_max` or inflight
stuck near the limit explains latency that the qdisc counters do not show.

BQL is a property of the device, not of a queue: drivers without it (veth, loopback,
most virtual devices) get no `byte_queue_limits` directory on any queue. So tx-0 is
tried first and a device without it costs one failed open per tick, whatever its
number of queues.
"""

from __future__ import annotations

import errno

from nettop.collectors.queue_config import list_queues
from nettop.collectors.numbers import decimal
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import BqlState
from nettop.kernel.sysroot import SysRoot

FIELDS = ("limit", "limit_max", "limit_min", "inflight")


def parse_bql(queue: int, values: dict[str, str], read_at: float | None = None) -> BqlState:
    """BqlState from the four files' text ({"limit": "2317", ...}); raises ValueError."""
    return BqlState(
        queue=queue,
        limit=decimal(values["limit"], 32, "limit"),
        limit_max=decimal(values["limit_max"], 32, "limit_max"),
        limit_min=decimal(values["limit_min"], 32, "limit_min"),
        inflight=decimal(values["inflight"], 32, "inflight"),
        read_at=read_at,
    )


def read_bql(root: SysRoot, ifname: str) -> tuple[tuple[BqlState, ...], list[Problem]]:
    """BqlState of every tx queue, () when the device has no BQL."""
    queues, problems = list_queues(root, ifname)
    tx = [i for kind, i in queues if kind == "tx"]
    out: list[BqlState] = []
    for n, index in enumerate(tx):
        state, absent = read_bql_queue(root, ifname, index, problems)
        if absent and n == 0:
            return (), problems
        if state is not None:
            out.append(state)
    return tuple(out), problems


def read_bql_queue(root: SysRoot, ifname: str, index: int, problems: list[Problem],
                   read_at: float | None = None) -> tuple[BqlState | None, bool]:
    """(BqlState of tx queue `index` stamped `read_at`, or None; True when it has no
    byte_queue_limits directory: the device has no BQL, or the queue went away since the
    listing)."""
    qdir = f"sys/class/net/{ifname}/queues/tx-{index}/byte_queue_limits/"
    values: dict[str, str] = {}
    for name in FIELDS:
        try:
            values[name] = root.read_line(qdir + name)
        except OSError as exc:
            if exc.errno == errno.ENOENT and not values and not root.exists(qdir):
                return None, True
            problems.append(from_oserror("/" + qdir + name, exc))
            return None, False
    try:
        return parse_bql(index, values, read_at), False
    except ValueError as exc:
        problems.append(malformed("/" + qdir, f"{values} ({exc})"))
        return None, False
