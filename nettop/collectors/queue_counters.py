"""Per-queue packets and bytes: netdev netlink qstats where the driver exports them,
else the driver's per-queue names in `ethtool -S` (read through the ioctl, or for a
captured host from the `ethtool -S IF` text a sosreport or `nettop capture` saved).

Drivers name per-queue statistics in their own ways; `parse_queue_stat_names` knows the
common ones. Only names that really count a queue's packets/bytes are used (veth's
`rx_queue_N_xdp_packets` counts only XDP/GRO-path packets, so veth gets none).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from nettop.model.problems import Problem
from nettop.model.snapshot import QueueCounters, QueueStats

if TYPE_CHECKING:
    from nettop.kernel.ethtool import Ethtool
    from nettop.kernel.sysroot import SysRoot
    from nettop.kernel.netdev_genl import NetdevNetlink

# (pattern, groups) → kind, index, field; packets/bytes may be split by cast (bnxt): summed
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, str, str]], ...] = (
    (re.compile(r"^(rx|tx)(\d+)_(packets|bytes)$"), ("k", "i", "f")),  # mlx5
    (re.compile(r"^(rx|tx)_queue_(\d+)_(packets|bytes)$"), ("k", "i", "f")),  # ixgbe igb ice virtio<6.10
    (re.compile(r"^(rx|tx)-(\d+)\.(?:rx_|tx_)?(packets|bytes)$"), ("k", "i", "f")),  # i40e
    (re.compile(r"^queue_(\d+)_(rx|tx)_(cnt|bytes)$"), ("i", "k", "f")),  # ena
    (re.compile(r"^\[(\d+)\]: (rx|tx)_(?:ucast|mcast|bcast)_(packets|bytes)$"), ("i", "k", "f")),  # bnxt
)


def parse_queue_stat_names(names: Iterable[str]) -> dict[int, tuple[str, int, str]]:
    """Pure: positions of per-queue counters in an ethtool -S name list.

    Returns {position: (kind "rx"/"tx", queue index, "packets"/"bytes")}.
    """
    out: dict[int, tuple[str, int, str]] = {}
    for pos, name in enumerate(names):
        for pat, order in _PATTERNS:
            m = pat.match(name)
            if not m:
                continue
            g = dict(zip(order, m.groups()))
            field = "packets" if g["f"] == "cnt" else g["f"]
            out[pos] = (g["k"], int(g["i"]), field)
            break
    return out


def counters_from_positions(positions: dict[int, tuple[str, int, str]], values: list[int]
                            ) -> tuple[QueueCounters, ...]:
    acc: dict[tuple[str, int], dict[str, int]] = {}
    for pos, (kind, idx, field) in positions.items():
        if pos < len(values):
            slot = acc.setdefault((kind, idx), {})
            slot[field] = slot.get(field, 0) + values[pos]
    return tuple(QueueCounters(k, i, v.get("packets"), v.get("bytes")) for (k, i), v in sorted(acc.items()))


def saved_ethtool_stats(root: SysRoot, names: Iterable[str]) -> dict[str, QueueStats]:
    """Per-queue counters of a captured host's NICs from their saved `ethtool -S` text;
    only NICs whose text names per-queue packets/bytes are returned."""
    from nettop.kernel import sos

    out: dict[str, QueueStats] = {}
    for name in names:
        pairs, _ = sos.ethtool_stats(root.path, name)
        positions = parse_queue_stat_names(n for n, _ in pairs)
        queues = counters_from_positions(positions, [v for _, v in pairs])
        if queues:
            out[name] = QueueStats(name, queues, "ethtool-stats")
    return out


def counters_from_qstats(rows: list[dict]) -> dict[int, tuple[QueueCounters, ...]]:
    """Pure: qstats-get rows (all interfaces) grouped per ifindex."""
    out: dict[int, list[QueueCounters]] = {}
    for r in rows:
        kind = r.get("queue_type")
        if kind not in ("rx", "tx") or "queue_id" not in r:
            continue
        out.setdefault(r["ifindex"], []).append(QueueCounters(
            kind, r["queue_id"], r.get(f"{kind}_packets"), r.get(f"{kind}_bytes")))
    return {k: tuple(sorted(v, key=lambda q: (q.kind, q.index))) for k, v in out.items()}


RECHECK_S = 10.0  # a device without per-queue ethtool counters is asked again this often


class QueueCounterReader:
    """Keeps the netlink support answer and each device's ethtool string table.

    A device whose `ethtool -S` names no per-queue packets or bytes (veth, ifb, bridges,
    a driver without the operation) would still cost an ioctl a tick, under RTNL, just to
    learn its table did not change: on a host with hundreds of veths, hundreds a tick. So
    such a device is asked again only every `recheck_s` seconds (its table changes with
    the driver, and a re-created device has a new ifindex, asked at once); a device with
    per-queue counters has its statistic count checked every tick, with its counters.
    """

    def __init__(self, nl: NetdevNetlink | None, ethtool: Ethtool | None,
                 recheck_s: float = RECHECK_S) -> None:
        self._nl = nl
        self._ethtool = ethtool
        self.recheck_s = recheck_s
        self._tables: dict[tuple[str, int], tuple[int, dict[int, tuple[str, int, str]]]] = {}
        self._none_since: dict[tuple[str, int], float] = {}  # no per-queue counters, as of when
        self._now = 0.0

    def read(self, links: dict[str, int], now: float | None = None) -> tuple[dict[str, QueueStats], list[Problem]]:
        """Per-queue counters for `links` (name → ifindex), at monotonic time `now` (None:
        every device is asked)."""
        self._now = now if now is not None else float("nan")
        problems: list[Problem] = []
        by_index: dict[int, tuple[QueueCounters, ...]] = {}
        if self._nl is not None:
            try:
                by_index = counters_from_qstats(self._nl.qstats())
            except Exception as exc:  # noqa: BLE001 - NetdevUnsupported or a socket error
                self._nl = None
                problems.append(Problem("netdev qstats-get", f"per-queue counters over netlink unavailable: {exc}"))
        out: dict[str, QueueStats] = {}
        for name, ifindex in links.items():
            if ifindex in by_index:
                out[name] = QueueStats(name, by_index[ifindex], "netdev-qstats")
                continue
            queues = self._ethtool_queues(name, ifindex)
            out[name] = QueueStats(name, queues, "ethtool-stats" if queues else "none")
        for key in [k for k in self._tables if links.get(k[0]) != k[1]]:
            del self._tables[key]
            self._none_since.pop(key, None)
        return out, problems

    def _ethtool_queues(self, name: str, ifindex: int) -> tuple[QueueCounters, ...]:
        if self._ethtool is None:
            return ()
        key = (name, ifindex)
        since = self._none_since.get(key)
        if since is not None and 0 <= self._now - since < self.recheck_s:
            return ()  # no per-queue counters when last asked, within recheck_s
        self._none_since.pop(key, None)
        try:
            n = self._ethtool.stat_count(name)
            cached = self._tables.get(key)
            if cached is None or cached[0] != n:  # driver reloaded or first look
                cached = (n, parse_queue_stat_names(self._ethtool.stat_names(name, n)) if n else {})
                self._tables[key] = cached
            if not cached[1]:
                self._none_since[key] = self._now
                return ()
            return counters_from_positions(cached[1], self._ethtool.stats(name, n))
        except OSError:
            self._tables[key] = (-1, {})
            self._none_since[key] = self._now
            return ()
