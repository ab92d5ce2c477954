"""Interface counters and state: one rtnetlink dump live, sysfs from a captured root.

Bonds, bridges and teams repeat their members' traffic, so aggregates are marked
(`is_aggregate`) and members carry their `master`; host totals count each packet once.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import itertools
import os
import re
import threading
from typing import TYPE_CHECKING, Iterable

from nettop.collectors import net_dev as net_dev_mod
from nettop.collectors.numbers import decimal, signed_decimal
from nettop.collectors.queue_config import QueueListings, by_listing, listdir_queues
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import LinkStats
from nettop.kernel.sysroot import SysRoot

if TYPE_CHECKING:
    from collections.abc import Callable

    from nettop.kernel.rtnl import LinkMsg, Rtnl

AGGREGATE_KINDS = frozenset({"bond", "bridge", "team"})
_STAT_FILES = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
               "rx_errors", "tx_errors", "rx_dropped", "tx_dropped")  # also NetDevRow's names


def read_links(root: SysRoot, rtnl: Rtnl | None = None,
               listings: QueueListings | None = None,
               missed: dict[str, int] | None = None,
               speeds: LinkSpeeds | None = None, now: float = 0.0) -> tuple[dict[str, LinkStats], list[Problem]]:
    """Every interface of the root namespace (live, over netlink) or of a captured tree
    (whose queue listings go into `listings` for the rest of the tick, when given).

    `missed`, when given, is filled from the netlink dump with each interface's ring
    overflows (rx_over + rx_fifo + rx_missed errors, the sum host_tuning.read_missed
    reads from three sysfs files per interface): the link dump carries them anyway.
    `speeds`: the caller's `LinkSpeeds` (live only), asked at monotonic time `now`;
    without it every interface's speed file is read."""
    if root.live and rtnl is not None:
        try:
            msgs = rtnl.links()
        except OSError as exc:
            problems = [from_oserror("netlink RTM_GETLINK", exc)]
            links, more = read_sysfs_links(root, listings)
            return links, problems + more
        if missed is not None:
            missed.update((m.name, m.rx_missed) for m in msgs if m.rx_missed is not None)
        if speeds is not None:
            return links_from_netlink(msgs, speeds.of(msgs, now).get), []
        return links_from_netlink(msgs, lambda name: _speed(root, name)), []
    return read_sysfs_links(root, listings)


def links_from_netlink(msgs: list[LinkMsg], speed_of: Callable[[str], int | None]) -> dict[str, LinkStats]:
    """Pure: netlink link messages into LinkStats (speed comes from a callback)."""
    by_index = {m.ifindex: m.name for m in msgs}
    out: dict[str, LinkStats] = {}
    for m in msgs:
        s = m.stats or (0,) * 10
        out[m.name] = LinkStats(
            name=m.name, ifindex=m.ifindex,
            rx_bytes=s[2], tx_bytes=s[3], rx_packets=s[0], tx_packets=s[1],
            rx_errors=s[4], tx_errors=s[5], rx_dropped=s[6], tx_dropped=s[7],
            operstate=m.operstate, mtu=m.mtu, txqueuelen=m.txqlen,
            speed_mbps=speed_of(m.name),
            kind=m.kind,
            master=by_index.get(m.master) if m.master else None,
            is_aggregate=m.kind in AGGREGATE_KINDS,
            num_rx_queues=m.num_rx_queues, num_tx_queues=m.num_tx_queues,
        )
    return out


def _speed(root: SysRoot, name: str) -> int | None:
    """Link speed in Mb/s; None when the driver does not know (virtual, link down)."""
    try:
        v = signed_decimal(root.read_line(f"sys/class/net/{name}/speed"))
    except (OSError, ValueError):
        return None
    return v if v > 0 else None


SPEED_REFRESH_S = 10.0  # a link's speed is read again at least this often


class LinkSpeeds:
    """Link speeds of the live kernel's interfaces, read when the link's state changes.

    sys/class/net/IF/speed was read for every interface every tick (an open each; ethtool's
    get_link_ksettings behind it, under RTNL), yet a NIC's speed only changes when the link
    is renegotiated, which takes the carrier down and up: the link dump counts that in
    IFLA_CARRIER_CHANGES and shows it in the operstate. So a speed is kept while the
    interface's (ifindex, operstate, carrier changes) stay the same, and read again when
    they change. A few drivers (virtio_net, some virtual ones) let `ethtool -s` set the
    reported speed without touching the carrier: for them, and for anything else this
    rule misses, every speed is also read again at least every `refresh_s` seconds (each
    at its own phase, spread by ifindex, so a host with a thousand veths does not read them
    all on one tick), and at once for an interface nettop itself changed (`notice`).
    Not thread-safe except `notice`.
    """

    def __init__(self, root: SysRoot, refresh_s: float = SPEED_REFRESH_S) -> None:
        self.root = root
        self.refresh_s = refresh_s
        # name -> ((ifindex, operstate, carrier changes), read again after, speed)
        self._known: dict[str, tuple[tuple[int, str, int | None], float, int | None]] = {}
        self._noticed: set[str] = set()
        self._lock = threading.Lock()
        self.reads = 0  # speed files read on the last call (a test's figure)

    def notice(self, ifnames: Iterable[str]) -> None:
        """Read these interfaces' speeds on the next tick (nettop changed them)."""
        with self._lock:
            self._noticed.update(ifnames)

    def of(self, msgs: list[LinkMsg], now: float) -> dict[str, int | None]:
        """Each interface's speed (Mb/s, None when unknown) at monotonic time `now`."""
        with self._lock:
            dirty, self._noticed = self._noticed, set()
        known = self._known
        out: dict[str, int | None] = {}
        fresh: dict[str, tuple[tuple[int, str, int | None], float, int | None]] = {}
        reads = 0
        for m in msgs:
            key = (m.ifindex, m.operstate, m.carrier_changes)
            got = known.get(m.name)
            if got is None or got[0] != key or now >= got[1] or m.name in dirty:
                # the next read within refresh_s, at a phase of its own (golden-ratio spread)
                phase = 0.5 + 0.5 * ((m.ifindex * 0.6180339887) % 1.0)
                got = (key, now + self.refresh_s * phase, _speed(self.root, m.name))
                reads += 1
            fresh[m.name] = got
            out[m.name] = got[2]
        self._known = fresh  # interfaces gone are forgotten
        self.reads = reads
        return out


def read_sysfs_links(root: SysRoot,
                     listings: QueueListings | None = None) -> tuple[dict[str, LinkStats], list[Problem]]:
    """Interfaces of a captured tree: sysfs for state, counters from each interface's
    `statistics/`, else from /proc/net/dev; an interface only /proc/net/dev lists (lo,
    bridges and veths of a /proc-only capture) is kept with what that file gives. A
    counter neither source holds is None, with one Problem per interface naming what is
    missing."""
    problems: list[Problem] = []
    net_dev, more = net_dev_mod.read_net_dev(root)
    problems.extend(more)
    try:
        names = sorted(root.listdir("sys/class/net"))
    except OSError as exc:
        names = []
        if net_dev is None:
            return {}, [from_oserror(root.join("sys/class/net"), exc)]
        problems.append(Problem(root.join("sys/class/net"), (
            f"cannot read {root.join('sys/class/net')} ({exc.strerror or exc}); interfaces "
            "and their counters come from /proc/net/dev only (no state, MTU, speed or queues)")))
    out: dict[str, LinkStats] = {}
    for name in names:
        link = _sysfs_link(root, name, net_dev, problems, listings)
        if link is not None:
            out[name] = link
    for name, row in sorted((net_dev or {}).items()):
        if name not in out:
            out[name] = LinkStats(
                name=name, ifindex=0,
                rx_bytes=row.rx_bytes, tx_bytes=row.tx_bytes,
                rx_packets=row.rx_packets, tx_packets=row.tx_packets,
                rx_errors=row.rx_errors, tx_errors=row.tx_errors,
                rx_dropped=row.rx_dropped, tx_dropped=row.tx_dropped)
    return _with_saved_ip_link(root, out), problems


def _with_saved_ip_link(root: SysRoot, links: dict[str, LinkStats]) -> dict[str, LinkStats]:
    """Fill what the capture's sysfs lacks (a sosreport copies `statistics/` and `flags`
    only) from its saved `ip -s -d link`: ifindex, MTU, txqueuelen, state, kind, master and
    queue counts; an interface only that output lists is added with its counters."""
    if root.live:
        return links
    from nettop.kernel import sos

    saved, _ = sos.ip_links(root.path)
    if not saved:
        return links
    out = dict(links)
    for name, ip in saved.items():
        link = out.get(name)
        if link is None:
            c = ip.counters
            # _STAT_FILES are LinkStats' counter fields, each int | None as c.get gives;
            # a dict splat loses that
            link = LinkStats(name=name, ifindex=0, **{f: c.get(f) for f in _STAT_FILES})  # type: ignore[arg-type]
        kind = link.kind or ip.kind
        out[name] = dataclasses.replace(
            link,
            ifindex=link.ifindex or ip.ifindex,
            mtu=link.mtu or ip.mtu or 0,
            txqueuelen=link.txqueuelen or ip.txqueuelen or 0,
            operstate=link.operstate if link.operstate != "unknown" else (ip.state or "unknown").lower(),
            kind=kind, is_aggregate=kind in AGGREGATE_KINDS,
            master=link.master or ip.master,
            num_rx_queues=link.num_rx_queues or ip.num_rx_queues or 0,
            num_tx_queues=link.num_tx_queues or ip.num_tx_queues or 0,
        )
    return dict(sorted(out.items()))


# an interface's one-value files read in one pass: its index, MTU, txqueuelen and the
# eight counters of statistics/ (all plain decimals), and its operstate (a word)
_FAST_FILES = ("ifindex", "mtu", "tx_queue_len", *(f"statistics/{f}" for f in _STAT_FILES), "operstate")


@functools.lru_cache(maxsize=256)
def _fast_paths(root: SysRoot, name: str) -> tuple[str, ...]:
    """The full paths of `_FAST_FILES` of an interface, made once per name."""
    base = root.join(f"sys/class/net/{name}/")
    return tuple(base + f for f in _FAST_FILES)


_U32, _U64 = 1 << 32, 1 << 64
_PLAIN_NUMBERS = re.compile(rb"(?:[0-9]{1,20}\n){%d}" % (len(_FAST_FILES) - 1))


def _fast_link(root: SysRoot, name: str) -> tuple[list[int], str] | None:
    """([ifindex, mtu, txqueuelen, the eight counters], operstate) read in C-level passes
    (open, read, close, each over the twelve files), when each is there and each number a
    plain decimal: what `_sysfs_link` reads then, without four Python calls a file (a
    tree's interfaces are read so every tick). None for anything else, which is read
    file by file and told."""
    fds: list[int] = []
    try:
        fds.extend(map(os.open, _fast_paths(root, name), itertools.repeat(os.O_RDONLY | os.O_CLOEXEC)))
        raw = list(map(os.read, fds, itertools.repeat(64)))
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)
    nums = raw[:-1]
    # each one a plain decimal and its newline: eleven such in all, each file ending in one
    if _PLAIN_NUMBERS.fullmatch(b"".join(nums)) is None \
            or not all(map(bytes.endswith, nums, itertools.repeat(b"\n"))):
        return None
    out = list(map(int, nums))
    if out[0] >= _U32 or max(out) >= _U64 or len(raw[-1]) >= 64:
        return None
    return out, raw[-1].decode("latin-1").strip()


def _stats(root: SysRoot, name: str, net_dev: dict[str, net_dev_mod.NetDevRow] | None,
           problems: list[Problem]) -> list[int | None]:
    """The eight counters of `_STAT_FILES`: sysfs `statistics/`, else /proc/net/dev."""
    base = f"sys/class/net/{name}/statistics"
    row = (net_dev or {}).get(name)
    if not root.exists(base):
        if row is not None:
            return [getattr(row, f) for f in _STAT_FILES]
        problems.append(Problem(root.join(base), (
            f"{root.join(base)} is not in the capture"
            + (" and /proc/net/dev has no line for it" if net_dev is not None
               else " (nor /proc/net/dev)")
            + f": {name}'s counters are unknown")))
        return [None] * len(_STAT_FILES)
    out: list[int | None] = []
    missing: list[str] = []
    for f in _STAT_FILES:
        path = f"{base}/{f}"
        try:
            out.append(decimal(root.read_line(path), 64))
            continue
        except ValueError as exc:
            problems.append(malformed(root.join(path), str(exc)))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                missing.append(f)
            else:
                problems.append(from_oserror(root.join(path), exc))
        out.append(getattr(row, f) if row is not None else None)
    if missing:
        problems.append(Problem(root.join(base), (
            f"{root.join(base)} lacks {', '.join(missing)}: "
            + ("taken from /proc/net/dev" if row is not None else "unknown"))))
    return out


def _sysfs_link(root: SysRoot, name: str, net_dev: dict[str, net_dev_mod.NetDevRow] | None,
                problems: list[Problem], listings: QueueListings | None = None) -> LinkStats | None:
    base = f"sys/class/net/{name}"

    def num(rel: str, default: int = 0) -> int:
        try:
            text = root.read_line(f"{base}/{rel}")
            return decimal(text, 64)
        except ValueError as exc:
            problems.append(malformed(root.join(f"{base}/{rel}"), str(exc)))
            return default
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EINVAL):
                problems.append(from_oserror(root.join(f"{base}/{rel}"), exc))
            return default

    fast = _fast_link(root, name)
    if fast is not None:
        (ifindex, mtu, txqueuelen, *stats), operstate = fast
    else:
        try:
            ifindex = decimal(root.read_line(f"{base}/ifindex"), 32)
        except (OSError, ValueError):
            # a sosreport copies some attributes only: an interface folder with statistics/
            # (or one /proc/net/dev lists) is still one, its ifindex unknown (0)
            if not (root.exists(f"{base}/statistics") or name in (net_dev or {})):
                return None  # not a network interface directory (e.g. bonding_masters)
            ifindex = 0
        stats = _stats(root, name, net_dev, problems)  # type: ignore[assignment]
        try:
            operstate = root.read_line(f"{base}/operstate")
        except OSError:
            operstate = "unknown"
        mtu, txqueuelen = num("mtu"), num("tx_queue_len")
    kind = None
    if root.exists(f"{base}/bonding"):
        kind = "bond"
    elif root.exists(f"{base}/bridge"):
        kind = "bridge"
    master = None
    if root.exists(f"{base}/master", follow_symlinks=False):  # most have none: no raise
        try:
            master = root.readlink(f"{base}/master").rstrip("/").rsplit("/", 1)[-1]
        except OSError:
            pass
    try:
        queues = listdir_queues(root, name, listings)
    except OSError:
        queues = []
    speed = _speed(root, name)
    counts = _queue_counts_of(queues)
    return LinkStats(
        name=name, ifindex=ifindex,
        rx_bytes=stats[0], tx_bytes=stats[1], rx_packets=stats[2], tx_packets=stats[3],
        rx_errors=stats[4], tx_errors=stats[5], rx_dropped=stats[6], tx_dropped=stats[7],
        operstate=operstate, mtu=mtu, txqueuelen=txqueuelen,
        speed_mbps=speed,
        kind=kind, master=master, is_aggregate=kind in AGGREGATE_KINDS,
        num_rx_queues=counts[0],
        num_tx_queues=counts[1],
    )


def _queue_counts_of(names: list[str]) -> tuple[int, int]:
    """`_queue_counts` of a listing, a kept one found by identity (`by_listing`)."""
    return by_listing(_COUNTS, names, lambda: _queue_counts(tuple(names)))


_COUNTS: dict[int, tuple[list[str], object]] = {}


@functools.lru_cache(maxsize=256)
def _queue_counts(names: tuple[str, ...]) -> tuple[int, int]:
    """The rx- and tx- entries of a queues/ listing, counted once per listing: a 128-queue
    NIC lists the same 256 names tick after tick."""
    return sum(q.startswith("rx-") for q in names), sum(q.startswith("tx-") for q in names)
