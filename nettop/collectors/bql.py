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

from nettop.collectors.queue_config import QueueFiles, list_queues
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
    files = QueueFiles(root, ifname)
    files.dir.begin()
    try:
        for n, index in enumerate(tx):
            state, absent = read_bql_queue(root, ifname, index, problems, files=files)
            if absent and n == 0:
                return (), problems
            if state is not None:
                out.append(state)
    finally:
        files.close()
    return tuple(out), problems


def read_bql_queue(root: SysRoot, ifname: str, index: int, problems: list[Problem],
                   read_at: float | None = None,
                   files: QueueFiles | None = None, hold: bool = False) -> tuple[BqlState | None, bool]:
    """(BqlState of tx queue `index` stamped `read_at`, or None; True when it has no
    byte_queue_limits directory: the device has no BQL, or the queue went away since the
    listing). `files`: the interface's held queues directory and last values (the
    settings rotation's); four files whose bytes are those of the last read are not
    parsed again; `hold`: the queue is read every tick (on screen), its files kept open."""
    qf = QueueFiles(root, ifname) if files is None else files
    held = qf.dir
    if files is None:
        held.begin()
    sub = f"tx-{index}/byte_queue_limits/"
    try:
        got: list[bytes] = []
        for name in FIELDS:
            try:
                got.append(held.read(sub + name, hold))
            except OSError as exc:
                if exc.errno == errno.ENOENT and not got and not held.exists(sub):
                    return None, True
                problems.append(from_oserror(f"/sys/class/net/{ifname}/queues/{sub}{name}", exc))
                return None, False
        raw = tuple(got)
        prev = qf.bql.get(index)
        if prev is not None and prev[0] == raw:
            p = prev[1]  # the same bytes: the same values, read again now
            return BqlState(index, p.limit, p.limit_max, p.limit_min, p.inflight, read_at), False
        values = {name: b.decode("latin-1").strip() for name, b in zip(FIELDS, raw)}
        try:
            state = parse_bql(index, values, read_at)
        except ValueError as exc:
            problems.append(malformed(f"/sys/class/net/{ifname}/queues/{sub}", f"{values} ({exc})"))
            return None, False
        qf.bql[index] = (raw, state)
        return state, False
    finally:
        if files is None:
            qf.close()
