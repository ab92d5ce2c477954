"""Queue and IRQ settings read rarely, and honestly: every tick on screen, in rotation off it.

RPS/XPS masks, RFS flow counts, BQL limits and IRQ affinities change when someone tunes
the host, not from one second to the next, yet a 64-queue NIC has 512 such files and
reading all of them every tick was most of the sampler's opens on a big host. So:

- the interfaces on screen (the ones the consumer asks for: `record`/`serve`'s --iface
  list) and the IRQs of their queues are read every tick, as are the IRQs a user
  follows; where the consumer names the queues it draws (the live view's visible queue
  and BQL rows: twenty of a 4 x 128-queue host's 512), only those and their IRQs are,
  and the rest of the interface rotates with everything else;
- everything else is read in rotation, oldest first, a budget of files per tick sized so
  that every setting is re-read at least every `period_s` seconds (ROTATION_S), or, on a
  host with more settings files than `files_per_s` (ROTATION_FILES_PER_S) can read in
  that time, every `files / files_per_s` seconds: a 4 x 128-queue host has ~6,100 such
  files, and reading a tenth of them each second was a quarter of the sampler's tick.
  `period()` says which applies; the screen shows each value's age either way;
- a queue or IRQ seen for the first time (a new interface, `ethtool -L`, a NIC reset) is
  read at once, and so is anything `notice` names: the pipeline calls it when nettop's
  own journal says a change was made, so nettop's changes show on the next tick;
- an IRQ without a /proc/irq/N (a captured tree without /proc/irq, a generated tree's
  async IRQ, an IRQ that went) counts as read: its absence is as of the tick that found
  it, and it is tried again in rotation (one failed open), not every tick.

Each value keeps the monotonic time of the tick that read it (`read_at`, equal to the
snapshot's `t_mono` when read this tick), so the screen and the JSON can say how old a
setting is when it is not from this tick. Which queues exist is known every tick: a
queue that appears or goes is a change in itself (the tick's listings, kept from tick to
tick while unchanged: queue_config.KeptListings). Not thread-safe except `notice`, which
any thread may call.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Mapping, TypeVar

from nettop.collectors.bql import FIELDS as BQL_FILES, read_bql_queue
from nettop.collectors.irq_affinity import IrqFiles, read_irq_affinity
from nettop.collectors.queue_config import QueueFiles, QueueListings, list_queues, read_queues
from nettop.model.problems import Problem
from nettop.model.snapshot import BqlState, IrqAffinity, QueueConfig
from nettop.kernel.held_files import fd_budget
from nettop.kernel.sysroot import HoldBudget, SysRoot

ROTATION_S = 10.0  # every setting off screen is re-read at least this often...
ROTATION_FILES_PER_S = 256  # ...unless that would read more than this many files a second
QUEUE_FILES = 2  # rps_cpus + rps_flow_cnt, or xps_cpus + xps_rxqs
IRQ_FILES = 4  # smp_affinity_list, effective_affinity_list, affinity_hint, node

V = TypeVar("V", QueueConfig, BqlState, IrqAffinity)

_NO_QUEUES: frozenset[tuple[str, int]] = frozenset()

# what one rotation item is: ("q", ifname, ifindex, kind, index), or an IRQ's number
Key = tuple[str, str, int, str, int] | int


@dataclass(frozen=True, slots=True)
class SettingsRead:
    """One tick's settings: fresh or carried over, each with its `read_at`."""

    queues: Mapping[str, tuple[QueueConfig, ...]]
    bql: Mapping[str, tuple[BqlState, ...]]
    affinity: Mapping[int, IrqAffinity]
    problems: list[Problem]
    files: int  # settings files this tick read (listings not counted)


def _stamped(value: V, t: float) -> V:
    """`value` stamped with the tick that read it (`read_at`): the readers stamp what
    they read; a value made elsewhere is stamped here. Kept so also when read this tick:
    a recording's samples then keep one shape from tick to tick (a changed shape starts
    a new chain, record/store.py)."""
    return value if value.read_at == t else dataclasses.replace(value, read_at=t)


class _Iface:
    __slots__ = ("files", "cfg", "bql", "has_bql", "problems", "out", "pos", "fresh", "fresh_bql", "first_tx",
                 "items")

    def __init__(self, root: SysRoot, name: str, budget: HoldBudget) -> None:
        # its queues directory held open, and its files' last bytes: one fd per interface,
        # made anew with the state when the name's ifindex changes (a new device); the
        # files of its queues on screen held too, within the rotation's budget
        self.files = QueueFiles(root, name, budget)
        self.cfg: dict[tuple[str, int], QueueConfig] = {}
        self.bql: dict[int, BqlState] = {}
        self.has_bql: bool | None = None  # None: not known yet
        self.problems: list[Problem] = []  # of the last read of this interface's queues
        # what the last tick gave out for its listing, while no queue of it is read again:
        # (listing, queue settings, BQL states); 4 x 128 queues are 1,536 values a tick
        self.out: tuple[list[tuple[str, int]], tuple[QueueConfig, ...], tuple[BqlState, ...]] | None = None
        # where each queue's value and each tx queue's BQL state sit in `out`, and the
        # queues and BQL states read since it was made: a tick that reads a few of 256
        # queues puts those in a copy of it, instead of making it again from the listing
        self.pos: tuple[dict[tuple[str, int], int], dict[int, int]] = ({}, {})
        self.fresh: list[tuple[str, int]] = []
        self.fresh_bql: list[int] = []
        self.first_tx: tuple[list[tuple[str, int]], int | None] | None = None  # (listing, its first tx queue)
        # the rotation's items of a listing whose every queue was read once: (listing,
        # has_bql, [(item, cost in files)], the queues drawn, which are not among them)
        self.items: tuple[list[tuple[str, int]], bool | None, dict[Key, int],
                          frozenset[tuple[str, int]]] | None = None


class SettingsRotation:
    def __init__(self, root: SysRoot, period_s: float = ROTATION_S,
                 files_per_s: float = ROTATION_FILES_PER_S) -> None:
        self.root = root
        self.period_s = period_s
        self.files_per_s = files_per_s
        self._period = period_s  # the last tick's (see `period`)
        self._ifaces: dict[tuple[str, int], _Iface] = {}
        self._aff: dict[int, IrqAffinity] = {}
        # IRQs without a /proc/irq/N (a capture without /proc/irq, an IRQ that went) ->
        # when that was found: read again at the rotation's pace, not every tick
        self._missing: dict[int, float] = {}
        # the settings files on screen (read every tick) held open, one pread a tick: an
        # eighth of the descriptors the process may have, at most 512 (20 queue rows of 8
        # files and their IRQs' 4 are ~240)
        self._hold = HoldBudget(fd_budget(8, 512))
        self._irq_files = IrqFiles(root, self._hold)
        self._aff_problems: dict[int, list[Problem]] = {}  # only the IRQs with some
        self._wanted: set[int] = set()  # the last tick's IRQs, and in order
        self._wanted_order: list[int] = []
        # the last tick's affinities in `_wanted_order` (None: made again next tick)
        self._aff_out: dict[int, IrqAffinity] | None = None
        # item -> read_at, oldest first: a plain dict keeps insertion order, and an item read
        # again is popped and put back at the end (an OrderedDict's own links cost more)
        self._order: dict[Key, float] = {}
        self._last_t: float | None = None
        self._lock = threading.Lock()
        self._noticed_ifs: set[str] = set()
        self._noticed_irqs: set[int] = set()

    def period(self) -> float:
        """Seconds within which every setting off screen is read again, as of the last
        tick: `period_s`, longer on a host with more files than `files_per_s` allows."""
        return self._period

    def close(self) -> None:
        """Close the held directories (one per interface, one for /proc/irq); a later
        `read` opens them again."""
        with self._lock:
            for st in self._ifaces.values():
                st.files.close()
            self._irq_files.close()

    def notice(self, ifnames: Iterable[str] = (), irqs: Iterable[int] = ()) -> None:
        """Read these interfaces' queue settings and these IRQs' affinity on the next tick
        whether on screen or not (nettop changed them). Any thread."""
        with self._lock:
            self._noticed_ifs.update(ifnames)
            self._noticed_irqs.update(irqs)

    def read(self, t: float, links: Mapping[str, int], on_screen: Callable[[str], bool],
             screen_irqs: Iterable[int], irqs: Iterable[int],
             managed: Callable[[int], bool | None] | None = None,
             listings: QueueListings | None = None,
             screen_queues: Mapping[str, Collection[tuple[str, int]]] | None = None) -> SettingsRead:
        """The settings of `links` (name -> ifindex) and of `irqs` at tick time `t` (with
        the tick's queue listings, when given). `screen_queues`, when given, names the
        queues (sysfs kind "rx"/"tx", index) of the interfaces on screen whose rows are
        drawn: only those are read every tick, the rest of such an interface in rotation
        (a 4 x 128-queue host draws twenty rows of 512); None: every queue of an interface
        on screen is."""
        with self._lock:
            dirty_ifs, self._noticed_ifs = self._noticed_ifs, set()
            dirty_irqs, self._noticed_irqs = self._noticed_irqs, set()
        dt = (t - self._last_t) if self._last_t is not None and t > self._last_t else self.period_s
        self._last_t = t
        root = self.root
        problems: list[Problem] = []

        # what exists this tick, and what must be read now
        listing: dict[str, list[tuple[str, int]]] = {}
        now: dict[str, list[tuple[str, int]]] = {}
        # the queues read every tick because they are on screen, whose files are held
        # open (HeldDir); None: every queue of the interface
        hold: dict[str, frozenset[tuple[str, int]] | None] = {}
        present: dict[Key, int] = {}  # rotating item -> its cost in files
        if self._ifaces.keys() - {(n, i) for n, i in links.items()}:
            for k, v in self._ifaces.items():
                if links.get(k[0]) != k[1]:
                    v.files.close()
            self._ifaces = {k: v for k, v in self._ifaces.items() if links.get(k[0]) == k[1]}
        for name, ifindex in links.items():
            queues, probs = list_queues(root, name, listings)
            problems.extend(probs)
            listing[name] = queues
            st = self._ifaces.get((name, ifindex))
            if st is None:
                st = self._ifaces[(name, ifindex)] = _Iface(root, name, self._hold)
            shown: frozenset[tuple[str, int]] = _NO_QUEUES
            seen = on_screen(name)
            if seen and screen_queues is None:
                hold[name] = None
            elif seen and screen_queues is not None and screen_queues.get(name):
                shown = hold[name] = frozenset(screen_queues[name])
            elif st.files.dir.held:
                st.files.dir.release()  # none of it on screen now: its files are rotation's
            if name in dirty_ifs or seen and screen_queues is None:
                now[name] = list(queues)
                continue
            cfg = st.cfg
            kept = st.items
            if kept is not None and kept[0] == queues and kept[1] == st.has_bql and kept[3] == shown:
                # the same queues and rows as last tick, each read before (the items are
                # made only then): the same items, and only the drawn rows are due
                now[name] = [q for q in queues if q in shown] if shown else []
                present.update(kept[2])
                continue
            # new queues at once, and the drawn rows' every tick
            due = now[name] = [q for q in queues if q not in cfg or q in shown]
            new = any(q not in cfg for q in due)
            tx_cost = QUEUE_FILES + (len(BQL_FILES) if st.has_bql else 0)
            # a dict, not pairs: `present.update` then takes each key's stored hash (a
            # 5-tuple's hash is made anew at each use: 256 a tick for a 128-queue NIC)
            items: dict[Key, int] = {
                ("q", name, ifindex, kind, index): QUEUE_FILES if kind == "rx" else tx_cost
                for kind, index in queues if (kind, index) in cfg and (kind, index) not in shown}
            st.items = None if new else (queues, st.has_bql, items, shown)
            present.update(items)
        wanted = set(irqs)
        shown_irqs = set(screen_irqs) & wanted  # read every tick: their files held open
        if not shown_irqs and self._irq_files.dir.held:
            self._irq_files.dir.release()  # none on screen now (with some, the pass lets go)
        screen = shown_irqs | (dirty_irqs & wanted)
        missing = self._missing
        irq_now = screen | (wanted - self._aff.keys() - missing.keys())
        rotating = wanted - irq_now
        present.update(dict.fromkeys(rotating, IRQ_FILES))  # an IRQ's item is its number
        if missing:
            present.update(dict.fromkeys(rotating & missing.keys(), 1))

        # the rotation: oldest first, a share of the whole per tick, plus anything that
        # would pass the period before the next tick
        files_due = sum(present.values())
        period = self._period = max(self.period_s, files_due / self.files_per_s)
        budget = math.ceil(files_due * min(dt, period) / period)
        spent = 0
        order = self._order
        for key in list(order):
            if not present:
                break
            read_at = order[key]
            if key not in present:
                if key not in wanted if isinstance(key, int) else (key[1], key[2]) not in self._ifaces:
                    del order[key]  # gone
                continue
            if spent >= budget and t - read_at + dt <= period:
                break
            spent += present.pop(key)
            if isinstance(key, int):
                irq_now.add(key)
            else:
                now.setdefault(key[1], []).append((key[3], key[4]))

        files = 0
        for name, due in now.items():
            if due:
                files += self._read_queues(t, name, links[name], due, listing[name], hold.get(name, ()))
        touched: list[int] = []  # the IRQs whose affinity was read this tick
        if irq_now:
            ordered = sorted(irq_now)  # and so into the rotation's order: ties go by number
            got, probs = read_irq_affinity(root, ordered, managed, t, self._irq_files, shown_irqs)
            files += IRQ_FILES * len(got) + len(irq_now) - len(got)  # a missing one: one open
            for i in ordered:
                order.pop(i, None)
                a = got.get(i)
                if a is None:  # no /proc/irq/N: counts as read, its absence as of now
                    if self._aff.pop(i, None) is not None:
                        self._aff_out = None
                    self._aff_problems.pop(i, None)
                    missing[i] = t
                    order[i] = t
                    continue
                missing.pop(i, None)
                self._aff[i] = _stamped(a, t)
                touched.append(i)
                mine = [p for p in probs if f"/irq/{i}/" in p.source] if probs else None
                if mine:
                    self._aff_problems[i] = mine
                else:
                    self._aff_problems.pop(i, None)
                order[i] = t
        if len(self._aff) + len(missing) > len(wanted):
            for i in [i for i in self._aff if i not in wanted]:
                del self._aff[i]
                self._aff_out = None
                self._aff_problems.pop(i, None)
            for i in [i for i in missing if i not in wanted]:
                del missing[i]
            self._irq_files.forget(wanted)

        queues_out: dict[str, tuple[QueueConfig, ...]] = {}
        bql_out: dict[str, tuple[BqlState, ...]] = {}
        for name, ifindex in links.items():
            st = self._ifaces[(name, ifindex)]
            problems.extend(st.problems)
            listed = listing[name]
            if st.out is None or st.out[0] != listed or not _patched(st):
                cfg, bql = st.cfg, st.bql
                kept_q = [q for q in listed if q in cfg]
                kept_b = [i for k, i in listed if k == "tx" and i in bql] if st.has_bql else []
                st.out = (listed, tuple([cfg[q] for q in kept_q]), tuple([bql[i] for i in kept_b]))
                st.pos = ({q: n for n, q in enumerate(kept_q)}, {i: n for n, i in enumerate(kept_b)})
            st.fresh.clear()
            st.fresh_bql.clear()
            queues_out[name], bql_out[name] = st.out[1], st.out[2]
        for i in sorted(self._aff_problems):
            if i in wanted:
                problems.extend(self._aff_problems[i])
        if wanted != self._wanted:
            self._wanted, self._wanted_order = wanted, sorted(wanted)
            self._aff_out = None
        aff, out = self._aff, self._aff_out
        if out is None or any(i not in out for i in touched):  # a new IRQ, or one gone
            out = {i: aff[i] for i in self._wanted_order if i in aff}
        elif touched:  # the same IRQs, some read again: last tick's with those in place
            out = dict(out)
            for i in touched:
                out[i] = aff[i]
        self._aff_out = out  # given out as is while nothing changes: do not change it
        return SettingsRead(queues_out, bql_out, out, problems, files)

    def _read_queues(self, t: float, name: str, ifindex: int, due: list[tuple[str, int]],
                     listed: list[tuple[str, int]],
                     hold: Collection[tuple[str, int]] | None = ()) -> int:
        """Read `due` queues of one interface into its state (the files of those in `hold`,
        None: all, kept open); returns the files read."""
        st = self._ifaces[(name, ifindex)]
        probs: list[Problem] = []
        cfgs, _ = read_queues(self.root, name, due, probs, t, st.files, hold)
        files = QUEUE_FILES * len(due)
        qf = st.files
        if len(st.cfg) > len(listed) or len(qf.names) > len(listed):
            keep = set(listed)
            st.cfg = {q: c for q, c in st.cfg.items() if q in keep}
            st.bql = {i: b for i, b in st.bql.items() if ("tx", i) in keep}
            # the queues gone (ethtool -L): their last bytes too
            qf.names = {q: n for q, n in qf.names.items() if q in keep}
            qf.cfg = {q: c for q, c in qf.cfg.items() if q in keep}
            qf.bql = {i: b for i, b in qf.bql.items() if ("tx", i) in keep}
            st.out = None
        order, fresh = self._order, st.fresh
        for c in cfgs:
            q = (c.kind, c.index)
            st.cfg[q] = _stamped(c, t)
            fresh.append(q)
            key: Key = ("q", name, ifindex, c.kind, c.index)
            order.pop(key, None)  # to the end: the newest read
            order[key] = t
        if st.first_tx is None or st.first_tx[0] is not listed:
            st.first_tx = (listed, next((i for k, i in listed if k == "tx"), None))
        first_tx = st.first_tx[1]
        for kind, index in due:
            if kind != "tx" or (st.has_bql is False and index != first_tx):
                continue
            state, absent = read_bql_queue(self.root, name, index, probs, t, st.files,
                                           hold is None or ("tx", index) in hold)
            files += 1 if absent else len(BQL_FILES)
            if absent and index == first_tx:
                st.has_bql, st.bql, st.out = False, {}, None
            elif state is not None:
                if st.has_bql is not True:
                    st.has_bql, st.out = True, None
                st.bql[index] = _stamped(state, t)
                st.fresh_bql.append(index)
        st.problems = probs
        return files


def _patched(st: _Iface) -> bool:
    """Put the queues and BQL states read since `st.out` was made into a copy of it;
    False (nothing changed) when one of them has no place in it (a queue read for the
    first time): it is then made again from the listing."""
    out = st.out
    assert out is not None
    if not st.fresh and not st.fresh_bql:
        return True
    qpos, bpos = st.pos
    cfgs, bqls = list(out[1]), list(out[2])
    for q in st.fresh:
        n = qpos.get(q)
        if n is None:
            return False
        cfgs[n] = st.cfg[q]
    for i in st.fresh_bql:
        n = bpos.get(i)
        if n is None:
            return False
        bqls[n] = st.bql[i]
    st.out = (out[0], tuple(cfgs), tuple(bqls))
    return True


__all__ = ["IRQ_FILES", "QUEUE_FILES", "ROTATION_FILES_PER_S", "ROTATION_S", "SettingsRead", "SettingsRotation"]
