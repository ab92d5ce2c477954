"""Software steering of each queue: RPS and RFS on rx queues, XPS on tx queues.

RPS (`rx-N/rps_cpus`) hands packets of hardware queue N to other CPUs for protocol
processing, RFS (`rx-N/rps_flow_cnt`) steers them towards the CPU of the consuming
socket, and XPS (`tx-N/xps_cpus`, `tx-N/xps_rxqs`) picks the tx queue from the sending
CPU or the receive queue. They are the knobs an operator turns after looking at the
per-CPU softirq load, so the UI shows them next to the queue rates and the timeline
records every change.

Masks are kept exactly as the kernel prints them ("00000000,0000000f"): a change made by
nettop is then verified by comparing strings, and a 256-CPU mask costs no parsing per
tick. Files that a device simply does not have are None without a problem: `xps_cpus`
fails with ENOENT on single-queue devices and EINVAL when a traffic class has no queue
for it, `rps_*` are absent without CONFIG_RPS. Read errors that a person can fix (EACCES
when not root) become one Problem per interface and file, not one per queue.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from typing import Any, Callable, Collection, Iterable

from nettop.collectors.numbers import decimal
from nettop.model.problems import Problem, from_oserror
from nettop.model.snapshot import BqlState, QueueConfig
from nettop.kernel.sysroot import HeldDir, HoldBudget, SysRoot

_QUEUE_DIR = re.compile(r"(rx|tx)-(\d{1,6})", re.ASCII)
_NOT_THERE = frozenset({errno.ENOENT, errno.EINVAL, errno.EOPNOTSUPP})
# (file name, errno) -> (first path that failed, its error, how many queues failed so)
_Failures = dict[tuple[str, int], tuple[str, OSError, int]]
_FILES = {"rx": ("rps_cpus", "rps_flow_cnt"), "tx": ("xps_cpus", "xps_rxqs")}


def parse_queue_dirs(names: list[str]) -> list[tuple[str, int]]:
    """("rx", 0), ("rx", 1), ("tx", 0) ... from the entries of sys/class/net/IF/queues,
    sorted rx before tx and by number (so "rx-10" follows "rx-9"). The list is shared:
    do not change it. A listing kept from tick to tick (KeptListings) is the same list
    object, and gives the same parsed list: its readers (the queue map, the settings
    rotation) then see an unchanged listing by identity, not by comparing 256 entries."""
    return by_listing(_PARSED, names, lambda: list(_parsed(tuple(names))))


def by_listing(memo: dict[int, tuple[list[str], Any]], names: list[str], make: Callable[[], Any]) -> Any:
    """`make()` for the listing `names`, kept in `memo` by the listing's identity: a
    listing kept from tick to tick (KeptListings) is the same list object, so what is
    made of it is looked up without hashing its entries. The listing is kept alive with
    its answer (its id is not reused); `memo` is cleared when it holds 64."""
    hit = memo.get(id(names))
    if hit is not None and hit[0] is names:
        return hit[1]
    got = make()
    if len(memo) >= 64:
        memo.clear()
    memo[id(names)] = (names, got)
    return got


# id(listing) -> (the listing, its parse)
_PARSED: dict[int, tuple[list[str], Any]] = {}


@functools.lru_cache(maxsize=256)
def _parsed(names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """Parsed once per listing: a 128-queue NIC's 256 entries are listed again every
    tick (the queue map and the settings rotation), the same names in the same order."""
    out = []
    for name in names:
        m = _QUEUE_DIR.fullmatch(name)
        if m:
            out.append((m.group(1), int(m.group(2))))
    out.sort()
    return tuple(out)


class KeptListings:
    """Queue listings kept from tick to tick while the directory shows no change.

    Listing a 128-queue NIC's `queues` (256 entries) costs ~100 µs, four such NICs
    ~0.5 ms a tick, for a set that changes only with its channels. One stat says whether
    it may have changed:
    - kernfs gives a directory as many links as it has subdirectories plus two, so a
      queue added or removed changes `st_nlink` (its mtime does not move). A swap of
      rx for tx queues at the same count (`ethtool -L rx 2 tx 4` after `rx 4 tx 2`)
      does not; it is a channels change, which the kernel's ethtool monitor names
      (`dirty`, set by the reader each tick). A live kernel without that monitor is
      listed every tick (its reader keeps no listings);
    - a device made again under its name has a new directory: a new inode;
    - a tree on an ordinary file system moves the directory's mtime with each entry.
    So a listing is reused while (device, inode, links, mtime) stay the same and the
    interface is not in `dirty`. The stat comes before the listing: a change between
    them leaves an older stat with the newer names, which the next tick lists again.
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[int, int, int, int], list[str]]] = {}
        self.dirty: set[str] = set()  # interfaces to list again whatever the stat says
        self.listed = 0  # listings made (a test's figure)

    def listdir(self, root: SysRoot, ifname: str) -> list[str]:
        path = root.join(f"sys/class/net/{ifname}/queues")
        st = os.stat(path)
        ident = (st.st_dev, st.st_ino, st.st_nlink, st.st_mtime_ns)
        hit = self._last.get(ifname)
        if hit is not None and hit[0] == ident and ifname not in self.dirty:
            return hit[1]
        names = os.listdir(path)
        self._last[ifname] = (ident, names)
        self.listed += 1
        return names

    def forget(self) -> None:
        """List every interface again (the monitor dropped notifications)."""
        self._last = {}

    def keep_only(self, ifnames: Iterable[str]) -> None:
        """Forget the listings of interfaces not in `ifnames` (gone): bounded by those present."""
        keep = set(ifnames)
        if self._last.keys() - keep:
            self._last = {k: v for k, v in self._last.items() if k in keep}


class QueueListings(dict[str, "list[str] | OSError"]):
    """One tick's listings of sys/class/net/IF/queues by interface: the entries, or the
    error listing them raised. The link reader (captured trees), the queue map and the
    settings rotation each need them: one listing a tick serves all three, as of one
    instant (a 128-queue NIC's directory holds 256 entries). `kept`: the reader's
    listings from earlier ticks, reused while unchanged (KeptListings)."""

    kept: KeptListings | None = None


def listdir_queues(root: SysRoot, ifname: str, listings: QueueListings | None = None) -> list[str]:
    """The entries of sys/class/net/IF/queues, listed once per `listings` (a tick's); raises
    OSError as the listing did. The list is shared: do not change it."""
    if listings is None:
        return root.listdir(f"sys/class/net/{ifname}/queues")
    got = listings.get(ifname)
    if got is None:
        try:
            kept = listings.kept
            got = kept.listdir(root, ifname) if kept is not None else root.listdir(f"sys/class/net/{ifname}/queues")
        except OSError as exc:
            got = exc
        listings[ifname] = got
    if isinstance(got, OSError):
        raise got
    return got


def list_queues(root: SysRoot, ifname: str,
                listings: QueueListings | None = None) -> tuple[list[tuple[str, int]], list[Problem]]:
    """The interface's queue directories; none (and no problem) if the interface is gone."""
    rel = f"sys/class/net/{ifname}/queues"
    try:
        return parse_queue_dirs(listdir_queues(root, ifname, listings)), []
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENODEV):
            return [], []
        return [], [from_oserror("/" + rel, exc)]


def read_queue_config(
    root: SysRoot, ifname: str
) -> tuple[tuple[QueueConfig, ...], list[Problem]]:
    """RPS/RFS settings of every rx queue and XPS settings of every tx queue."""
    queues, problems = list_queues(root, ifname)
    return read_queues(root, ifname, queues, problems)


class QueueFiles:
    """One interface's `queues` directory held open, and what its files gave last time.

    The settings rotation keeps one per interface (name and ifindex: a new ifindex is a
    new device, so a new one): each file is opened relative to the held directory
    (HeldDir), and a queue whose files hold the same bytes as at its last read is not
    parsed again, only stamped anew. The names are formatted once per queue.
    """

    __slots__ = ("dir", "names", "cfg", "bql", "absent")

    def __init__(self, root: SysRoot, ifname: str, budget: HoldBudget | None = None) -> None:
        self.dir = HeldDir(root, f"sys/class/net/{ifname}/queues", budget)
        self.names: dict[tuple[str, int], tuple[str, str]] = {}
        # (kind, index) -> (mask bytes, other bytes, the QueueConfig made of them)
        self.cfg: dict[tuple[str, int], tuple[bytes | None, bytes | None, QueueConfig]] = {}
        # tx index -> (the four files' bytes, the BqlState made of them)
        self.bql: dict[int, tuple[tuple[bytes, ...], BqlState]] = {}
        # the kinds ("rx", "tx") whose second file the device's queues do not have: one
        # was not there while the same queue's mask was (xps_rxqs before Linux 4.18); the
        # kernel makes the same attributes for every queue of a device, so it is not
        # asked again (a failed open was most of a tick's settings cost on such a host)
        self.absent: set[str] = set()

    def close(self) -> None:
        self.dir.close()


def read_queues(
    root: SysRoot, ifname: str, queues: list[tuple[str, int]], problems: list[Problem] | None = None,
    read_at: float | None = None, files: QueueFiles | None = None,
    hold: Collection[tuple[str, int]] | None = (),
) -> tuple[tuple[QueueConfig, ...], list[Problem]]:
    """The settings of the named queues of `ifname` only (the settings rotation reads a
    few each tick, stamped `read_at`, through its `files` of the interface), failures
    summarized per file as in `read_queue_config`. `hold`: the queues read every tick
    (on screen), whose files `files` keeps open (HeldDir); None: all of `queues`."""
    problems = [] if problems is None else problems
    own = files is None
    qf = QueueFiles(root, ifname) if files is None else files
    failed: _Failures = {}
    out = []
    held = qf.dir
    held.begin()
    names, last = qf.names, qf.cfg
    try:
        for q in queues:
            kind, index = q
            pair = names.get(q)
            if pair is None:
                mask_file, other_file = _FILES[kind]
                pair = names[q] = (f"{kind}-{index}/{mask_file}", f"{kind}-{index}/{other_file}")
            keep = hold is None or q in hold
            mask = _read(held, pair[0], failed, keep)
            if kind in qf.absent:
                other = None
            else:
                other = _read(held, pair[1], failed, keep)
                if other is None and type(mask) is bytes:
                    qf.absent.add(kind)
            prev = last.get(q)
            if prev is not None and prev[0] == mask and prev[1] == other:
                p = prev[2]  # the same bytes: the same values, read again now
                out.append(QueueConfig(kind, index, p.rps_cpus, p.rps_flow_cnt, p.xps_cpus, p.xps_rxqs, read_at))
                continue
            mask_text = mask.decode("latin-1").strip() if type(mask) is bytes else None
            other_text = other.decode("latin-1").strip() if type(other) is bytes else None
            if kind == "rx":
                flow_cnt = None
                if other_text is not None:
                    try:
                        flow_cnt = decimal(other_text, 32)
                    except ValueError:
                        rel = f"/sys/class/net/{ifname}/queues/{pair[1]}"
                        problems.append(Problem(rel, f"skipped a malformed value in {rel}: {other_text[:40]!r}"))
                        other = _FAILED  # not remembered: parsed (and told) again next time
                cfg = QueueConfig("rx", index, mask_text, flow_cnt, None, None, read_at)
            else:
                cfg = QueueConfig("tx", index, None, None, mask_text, other_text, read_at)
            out.append(cfg)
            if mask is not _FAILED and other is not _FAILED:
                last[q] = (mask, other, cfg)
    finally:
        if own:
            qf.close()
    for (fname, _), (first, exc, count) in failed.items():
        problems.append(_summarize(ifname, fname, f"/sys/class/net/{ifname}/queues/{first}", exc, count))
    return tuple(out), problems


class _Failed:
    """A read that failed in a way worth telling: no value, and never remembered as "the
    same bytes as last time", so the next read parses (and tells) again."""


_FAILED: Any = _Failed()


def _read(held: HeldDir, name: str, failed: _Failures, hold: bool = False) -> bytes | None:
    try:
        return held.read(name, hold)
    except OSError as exc:
        if exc.errno in _NOT_THERE:
            return None
        fname = name.rsplit("/", 1)[1]
        key = (fname, exc.errno or 0)
        first, first_exc, count = failed.get(key, (name, exc, 0))
        failed[key] = (first, first_exc, count + 1)
        return _FAILED


def _summarize(ifname: str, fname: str, first: str, exc: OSError, count: int) -> Problem:
    """One line for every queue of `ifname` whose `fname` failed the same way."""
    kind = "rx" if fname.startswith("rps") else "tx"
    source = f"/sys/class/net/{ifname}/queues/{kind}-*/{fname}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Problem(source, f"cannot read {fname} of {ifname} ({count} queue"
                               f"{'s' if count != 1 else ''}): permission denied; "
                               "run nettop as root to see it")
    p = from_oserror(first, exc)
    if count == 1:
        return Problem(source, p.message)
    return Problem(source, f"{p.message} (and {count - 1} more {kind} queues of {ifname})")
