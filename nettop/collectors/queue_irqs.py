"""Which IRQ serves which NIC queue.

The kernel says it directly only through netdev genetlink (queue → NAPI → IRQ), and only
for drivers that record the NAPI's IRQ. Everything else is inferred the way operators do
it by hand: the device's MSI vectors (`device/msi_irqs`, or the PCI parent's for virtio)
narrowed down by the names drivers give their IRQs in /proc/interrupts:

    mlx5_comp<N>@pci:<bdf>, mlx4-comp-<N>@pci:<bdf>   combined N (bdf must be the device's)
    <if>-TxRx-<N>, i40e-<if>-TxRx-<N>, ice-<if>-TxRx-<N>, <if>-Tx-Rx-<N> (ena), <if>-<N>
                                                      combined N
    <if>-rx-<N>, <if>-tx-<N>, <if>-tx-<N>-rx-<M>      rx N / tx N / both
    virtio<K>-input.<q>, virtio<K>-output.<q>          rx q / tx q of the device virtio<K>
    ena-io-<N>                                        combined N (only among msi_irqs)

The device's other vectors (config, async events, mailbox, link) go to `other_irqs`.
Naming also works on a captured /proc/interrupts without sysfs. A queue with no IRQ
(veth, loopback) is listed with `irqs=()` and the map's source is "none".
"""

from __future__ import annotations

import functools
import operator
import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from nettop.collectors.numbers import decimal
from nettop.collectors.queue_config import QueueListings, listdir_queues, parse_queue_dirs
from nettop.model.problems import Problem
from nettop.model.snapshot import InterruptTable, Irq, QueueIrqs, QueueMap
from nettop.kernel.sysroot import SysRoot

if TYPE_CHECKING:
    from nettop.kernel.netdev_genl import NetdevNetlink

# re.ASCII: `\d` would also match Unicode digits ("٣"), which no kernel prints.
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_VIRTIO = re.compile(r"virtio\d+", re.ASCII)
_PCI_VEC = re.compile(r"(?:mlx5_comp(\d{1,6})|mlx4-comp-(\d{1,6}))@pci:(\S+)", re.ASCII)


@dataclass(frozen=True, slots=True)
class DeviceIrqs:
    """What sysfs says about the device behind an interface."""

    bdf: str | None = None  # PCI address of the function ("0000:81:00.0")
    virtio: str | None = None  # "virtio2" when the netdev sits on a virtio device
    msi_irqs: frozenset[int] | None = None  # None: no msi_irqs directory to go by


def read_device(root: SysRoot, ifname: str) -> DeviceIrqs | None:
    """The interface's device (None when it has none: veth, bridge, loopback)."""
    where = _device_where(root, ifname)
    return _with_msi(where) if where is not None else None


# Where an interface's device sits in sysfs: (its bdf, its virtio name, the directories
# that may hold its msi_irqs/, in the order they are tried)
_Where = tuple["str | None", "str | None", "tuple[str, ...]"]


def _device_where(root: SysRoot, ifname: str) -> _Where | None:
    link = root.join(f"sys/class/net/{ifname}/device")
    if not os.path.lexists(link):
        return None
    path = _device_path(root.join(f"sys/class/net/{ifname}"), link)
    base, parent = os.path.basename(path), os.path.dirname(path)
    virtio = base if _VIRTIO.fullmatch(base) else None
    bdf = base if _BDF.fullmatch(base) else None
    if bdf is None and _BDF.fullmatch(os.path.basename(parent)):
        bdf = os.path.basename(parent)
    return bdf, virtio, (path, parent) if virtio or bdf != base else (path,)


def _with_msi(where: _Where) -> DeviceIrqs:
    """The device with this instant's msi_irqs/ listing (vectors come and go with
    channels, resets and driver reloads: listed every time)."""
    bdf, virtio, dirs = where
    msi = None
    for d in dirs:
        try:
            msi = _msi_irqs(tuple(os.listdir(os.path.join(d, "msi_irqs"))))
            break
        except OSError:
            continue
    return DeviceIrqs(bdf, virtio, msi)


class DeviceLinks:
    """Where each interface's device sits, kept for as long as the interface exists.

    A netdev's parent device is set before it is registered and stays until it is
    unregistered (a rename or a netns move keeps it), so its `device` link, bdf and virtio
    name are facts of the (name, ifindex) pair; the kernel gives a re-created or re-bound
    netdev a new ifindex (an index a user picks, `ip link add ... index N`, is only for
    virtual links made by hand, which have no device link). Resolving them was an lstat
    and two readlinks per interface per tick; now it is done once per (name, ifindex), and
    only msi_irqs/ is listed each tick.
    A captured tree's interfaces with an ifindex file are kept the same way (a capture
    does not change; one without it, as some sosreports are, is resolved every tick).
    Not thread-safe.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, int], _Where | None] = {}
        self.resolved = 0  # interfaces resolved on the last tick (a test's figure)

    def read(self, root: SysRoot, ifname: str, ifindex: int) -> DeviceIrqs | None:
        key = (ifname, ifindex)
        if key in self._known:
            where = self._known[key]
        else:
            where = self._known[key] = _device_where(root, ifname)
            self.resolved += 1
        return _with_msi(where) if where is not None else None

    def keep_only(self, keys: set[tuple[str, int]]) -> None:
        """Forget the interfaces not in `keys` (gone, renamed or re-created)."""
        if self._known.keys() - keys:
            self._known = {k: v for k, v in self._known.items() if k in keys}


# realpath of an interface's device link by (its class link, that link's target, the
# device link's target): the two links are what a re-created interface or a driver
# bound to another device changes, read again each tick (two readlinks) instead of
# resolving the whole path (an lstat per component, ~8; more under a capture's path)
_DEVICE_PATHS: dict[tuple[str, str, str], str] = {}


def _device_path(cls: str, link: str) -> str:
    try:
        target = os.readlink(link)
    except OSError:  # a capture whose device is a directory, not a link
        return os.path.realpath(link)
    try:
        key = (cls, os.readlink(cls), target)
    except OSError:  # a capture whose class/net/IF is a directory: its device link decides
        key = (cls, "", target)
    got = _DEVICE_PATHS.get(key)
    if got is None:
        if len(_DEVICE_PATHS) >= 256:
            _DEVICE_PATHS.clear()
        got = _DEVICE_PATHS[key] = os.path.realpath(link)
    return got


@functools.lru_cache(maxsize=64)
def _msi_irqs(names: tuple[str, ...]) -> frozenset[int]:
    """The IRQ numbers of an msi_irqs/ listing, parsed once per listing (listed each tick:
    vectors come and go with channels and resets)."""
    return frozenset(int(x) for x in names if x.isascii() and x.isdigit() and len(x) <= 10)


def read_queue_dirs(root: SysRoot, ifname: str,
                    listings: QueueListings | None = None) -> list[tuple[str, int]] | None:
    """("rx", 0), ("tx", 0), ... from sys/class/net/IF/queues; None if it is not there."""
    try:
        names = listdir_queues(root, ifname, listings)
    except OSError:
        return None
    return parse_queue_dirs(names)


SHARED = [("*", -1)]  # one vector for the whole device: serves every queue if none is specific


def classify(name: str, ifname: str, dev: DeviceIrqs | None,
             in_msi: bool = False) -> list[tuple[str, int]] | None:
    """Queues an IRQ named `name` serves for `ifname`: [] for a device IRQ that serves
    none (config, misc, link), SHARED for a device's single vector, None when the name
    is not this interface's. `in_msi`: the IRQ is known to be one of the device's."""
    if name.startswith(ifname):
        rest = name[len(ifname):]
        if rest == "":
            return SHARED
        m = _IF_SUFFIX.fullmatch(rest)
        return _suffix_queues(m) if m else None
    for prefix in ("i40e-", "ice-"):
        if name.startswith(prefix + ifname + "-"):
            m = _IF_SUFFIX.fullmatch(name[len(prefix) + len(ifname):])
            return _suffix_queues(m) if m else None
    if dev is None:
        return None
    if dev.virtio and name.startswith(dev.virtio):
        rest = name[len(dev.virtio):]
        if rest in ("", "-virtqueues"):
            return SHARED
        m = _VIRTIO_SUFFIX.fullmatch(rest)
        if m:
            return [("rx" if m.group(1) == "input" else "tx", int(m.group(2)))]
        return [] if rest.startswith("-") else None
    if dev.bdf and "@pci:" in name:
        m = _PCI_VEC.fullmatch(name)
        if m:
            return [("combined", int(m.group(1) or m.group(2)))] if m.group(3) == dev.bdf else None
    if dev.bdf and dev.bdf in name:
        return []  # i40e-<bdf>:misc, mlx5_async@pci:<bdf>, ena-mgmnt@pci:<bdf>, ...
    if in_msi:
        m = _ENA_IO.fullmatch(name)
        if m:
            return [("combined", int(m.group(1)))]
    return None


_IF_SUFFIX = re.compile(
    r"-(?:(?P<c>\d{1,6})|(?:TxRx|Tx-Rx|txrx)-(?P<cc>\d{1,6})|rx-(?P<rx>\d{1,6})|tx-(?P<tx>\d{1,6})"
    r"|tx-(?P<ptx>\d{1,6})-rx-(?P<prx>\d{1,6}))", re.ASCII)
_VIRTIO_SUFFIX = re.compile(r"-(input|output)\.(\d{1,6})", re.ASCII)
_ENA_IO = re.compile(r"ena-io-(\d{1,6})", re.ASCII)


def _suffix_queues(m: re.Match[str]) -> list[tuple[str, int]]:
    if m.group("c") is not None:
        return [("combined", int(m.group("c")))]
    if m.group("cc") is not None:
        return [("combined", int(m.group("cc")))]
    if m.group("rx") is not None:
        return [("rx", int(m.group("rx")))]
    if m.group("tx") is not None:
        return [("tx", int(m.group("tx")))]
    return [("tx", int(m.group("ptx"))), ("rx", int(m.group("prx")))]


# --- building the map ------------------------------------------------------------------

_KIND_ORDER = {"combined": 0, "rx": 1, "tx": 2}


def map_by_names(ifname: str, irqs: InterruptTable, dev: DeviceIrqs | None,
                 queue_dirs: list[tuple[str, int]] | None,
                 napi_ids: dict[tuple[str, int], int] | None = None) -> QueueMap:
    """Pure: the queue map from IRQ names (and msi_irqs when `dev` has them)."""
    table = irqs.irqs
    msi = dev.msi_irqs if dev is not None else None
    if msi is not None:
        candidates: Iterable[int] = sorted(msi)
    elif dev is None and queue_dirs is not None:
        candidates = ()  # a software device (veth, bridge, lo): no IRQ can be its own
    else:
        candidates = table.keys()
    assigned: dict[tuple[str, int], list[int]] = {}
    shared: list[int] = []
    other: list[int] = []
    bdf_chip = ("-" + dev.bdf) if dev is not None and dev.bdf else None
    for irq in candidates:
        info = table.get(irq)
        if info is None:
            if msi is not None:
                other.append(irq)
            continue
        q = classify(info.name, ifname, dev, msi is not None)
        if q is None:
            if msi is not None or (bdf_chip and info.chip.endswith(bdf_chip)):
                other.append(irq)
        elif q is SHARED:
            shared.append(irq)
        elif not q:
            other.append(irq)
        else:
            for key in q:
                assigned.setdefault(key, []).append(irq)
    if queue_dirs:
        rx = {i for k, i in queue_dirs if k == "rx"}
        tx = {i for k, i in queue_dirs if k == "tx"}
        for (kind, idx) in list(assigned):
            ok = idx in rx if kind == "rx" else idx in tx if kind == "tx" else (idx in rx or idx in tx)
            if not ok:  # e.g. mlx5 completion vectors beyond the configured channels
                other.extend(assigned.pop((kind, idx)))
    if not assigned and shared:
        for key in queue_dirs or [("combined", 0)]:
            assigned[key] = list(shared)
    else:
        other.extend(shared)
    return _build(ifname, assigned, queue_dirs, napi_ids or {}, other, "driver-naming")


def _build(ifname: str, assigned: dict[tuple[str, int], list[int]],
           queue_dirs: list[tuple[str, int]] | None, napi_ids: dict[tuple[str, int], int],
           other: Iterable[int], source: str) -> QueueMap:
    covered = set(assigned)
    for kind, idx in list(assigned):
        if kind == "combined":
            covered.update((("rx", idx), ("tx", idx)))
    for key in queue_dirs or ():
        if key not in covered:
            assigned[key] = []
    rows = []
    for (kind, idx) in sorted(assigned, key=lambda k: (_KIND_ORDER.get(k[0], 3), k[1])):
        napi = napi_ids.get((kind, idx))
        if napi is None and kind == "combined":
            napi = napi_ids.get(("rx", idx), napi_ids.get(("tx", idx)))
        rows.append(QueueIrqs(kind, idx, tuple(dict.fromkeys(assigned[(kind, idx)])), napi))
    used = {i for r in rows for i in r.irqs}
    others = tuple(sorted(set(other) - used))
    if not used:
        source = "none"
    return QueueMap(ifname, tuple(rows), source, others)


def map_by_netlink(ifname: str, queues: list[dict[str, Any]], napis: list[dict[str, Any]],
                   fallback: QueueMap) -> QueueMap | None:
    """Pure: the map from netdev genetlink answers, or None when no NAPI has an IRQ.

    rx-N and tx-N served by the same NAPI become one "combined" row. A queue whose NAPI
    has no IRQ keeps what the naming map (`fallback`) found for it; the device's other
    IRQs are those the naming map knows that no queue uses."""
    irq_of = {n["id"]: n["irq"] for n in napis if "id" in n and "irq" in n}
    if not irq_of:
        return None
    napi_of = {(q["type"], q["id"]): q.get("napi_id") for q in queues
               if q.get("type") in ("rx", "tx") and "id" in q}
    assigned: dict[tuple[str, int], list[int]] = {}
    napi_ids: dict[tuple[str, int], int] = {}
    for (kind, idx), napi in sorted(napi_of.items()):
        if kind == "tx" and napi is not None and napi_of.get(("rx", idx)) == napi:
            continue  # folded into the combined row below
        if kind == "rx" and napi is not None and napi_of.get(("tx", idx)) == napi:
            kind = "combined"
        assigned[(kind, idx)] = [irq_of[napi]] if napi in irq_of else []
        if napi is not None:
            napi_ids[(kind, idx)] = napi
    named = {(r.kind, r.index): r.irqs for r in fallback.queues}
    for (kind, idx), got in assigned.items():
        if not got:
            got.extend(named.get((kind, idx)) or named.get(("combined", idx)) or ())
    known = {i for r in fallback.queues for i in r.irqs} | set(fallback.other_irqs)
    return _build(ifname, assigned, None, napi_ids, known, "netdev-netlink")


# --- readers ---------------------------------------------------------------------------


def _netlink_answers(nl: NetdevNetlink, ifindex: int | None, what: str,
                     problems: list[Problem]) -> tuple[list[dict], list[dict]] | None:
    from nettop.kernel.netdev_genl import NetdevUnsupported

    try:
        return nl.queues(ifindex), nl.napis(ifindex)
    except NetdevUnsupported:
        return None  # an older kernel: driver naming is all there is
    except Exception as exc:  # noqa: BLE001 - a netlink failure must not stop the tick
        problems.append(Problem(f"netdev genetlink {what}",
                                f"cannot ask netdev genetlink for the queues of {what}: {exc}; "
                                "queue IRQs come from driver naming instead"))
        return None


def _ifindex(root: SysRoot, ifname: str) -> int | None:
    try:
        return decimal(root.read_line(f"sys/class/net/{ifname}/ifindex"), 32)
    except (OSError, ValueError):
        return None


def _map_one(root: SysRoot, ifname: str, irqs: InterruptTable,
             answers: tuple[list[dict], list[dict]] | None,
             problems: list[Problem], listings: QueueListings | None = None) -> QueueMap:
    queue_dirs, dev = _inputs(root, ifname, irqs, problems, listings)
    return _map_from(ifname, irqs, dev, queue_dirs, answers)


def _inputs(root: SysRoot, ifname: str, irqs: InterruptTable, problems: list[Problem],
            listings: QueueListings | None = None, devices: DeviceLinks | None = None,
            ifindex: int | None = None) -> tuple[list[tuple[str, int]] | None, DeviceIrqs | None]:
    """The interface's queue listing and device (this tick's), with their problems.
    `devices` with the interface's `ifindex`: where its device sits, as kept there."""
    queue_dirs = read_queue_dirs(root, ifname, listings)
    if queue_dirs is None and root.exists("sys/class/net") and root.exists(f"sys/class/net/{ifname}"):
        problems.append(Problem(f"sys/class/net/{ifname}/queues",
                                f"cannot list the queues of {ifname} (sys/class/net/{ifname}/queues)"))
    if devices is not None and ifindex is not None:
        dev = devices.read(root, ifname, ifindex)
    else:
        dev = read_device(root, ifname)
    if dev is not None and dev.msi_irqs and irqs.irqs:
        # (not `msi - table.keys()`: that copies 16,384 keys into a set; a set's
        # difference with a dict looks each of its own up)
        names = names_of(irqs)
        absent = sorted(dev.msi_irqs.difference(names) if isinstance(names, dict)
                        else (i for i in dev.msi_irqs if i not in names))
        if absent:  # a capture whose sysfs and /proc/interrupts disagree, or a vector freed
            shown = ", ".join(map(str, absent[:8])) + (", ..." if len(absent) > 8 else "")
            problems.append(Problem(f"sys/class/net/{ifname}/device/msi_irqs", (
                f"{ifname}'s device lists MSI IRQ {shown} in msi_irqs/ but /proc/interrupts "
                "does not have them (captured at different times, or freed since): their "
                "counts and queues are unknown")))
    return queue_dirs, dev


def _map_from(ifname: str, irqs: InterruptTable, dev: DeviceIrqs | None,
              queue_dirs: list[tuple[str, int]] | None,
              answers: tuple[list[dict], list[dict]] | None) -> QueueMap:
    key = _memo_key(ifname, irqs, dev, queue_dirs, answers)
    if key is not None:
        last = _LAST.get(ifname)
        if last is not None and last[0] == key:  # compared, not hashed: ~200 tuples a NIC
            return last[1]
        hit = _MAPS.get(key)
        if hit is not None:
            _LAST[ifname] = (key, hit)
            return hit
    got = _map_pure(ifname, irqs, dev, queue_dirs, answers)
    if key is not None:
        if len(_MAPS) >= _MAPS_MAX:
            _MAPS.clear()
            _LAST.clear()
        _MAPS[key] = got
        _LAST[ifname] = (key, got)
    return got


# The map of an interface is a pure function of a few inputs that change only when the
# host is reconfigured (channels, a NIC reset, a driver reload); on a 4 x 128-queue host
# working it out again each tick cost milliseconds. Keyed by every input it reads.
_MAPS: dict[tuple, QueueMap] = {}
# each interface's last key and map: a tick whose inputs equal the last ones' (nearly
# every tick) compares the keys instead of hashing one (tuples do not keep their hash)
_LAST: dict[str, tuple[tuple, QueueMap]] = {}
_MAPS_MAX = 256
_NL_KEYS = ("type", "id", "napi_id", "irq")
_MISSING = object()  # an attribute the answer did not carry (not the same as a None value)
_NAME_CHIP = operator.attrgetter("name", "chip")


def names_of(irqs: InterruptTable) -> Mapping[int, Irq]:
    """The table's IRQs for their names and chips: the sysfs reader's name-only dict
    where it has one (its lookups are C calls, the merged view's are Python ones)."""
    table = irqs.irqs
    bare = getattr(table, "bare", None)
    return bare if isinstance(bare, dict) else table


def _memo_key(ifname: str, irqs: InterruptTable, dev: DeviceIrqs | None,
              queue_dirs: list[tuple[str, int]] | None,
              answers: tuple[list[dict], list[dict]] | None) -> tuple | None:
    """Everything `_map_pure` reads, or None when that is the whole IRQ table (a device
    without msi_irqs: any IRQ's name may be its), which is not worth keying on."""
    msi = dev.msi_irqs if dev is not None else None
    if msi is not None:
        table = names_of(irqs)
        last = _SEEN.get(ifname)
        if last is not None and last[0] is msi and last[1] is table:
            # the same vectors (a listing parsed once: the same frozenset) and the same
            # names (the sysfs reader's dict, made anew only when a name changes)
            seen: tuple = last[2]
        else:
            order = sorted(msi)
            got = list(map(table.get, order))
            if all(got):  # every vector in the table (an Irq is always true): C-level calls
                seen = ("all", tuple(order), tuple(map(_NAME_CHIP, got)))
            else:
                seen = tuple((i, table[i].name, table[i].chip) if i in table else (i,) for i in order)
            if len(_SEEN) >= _MAPS_MAX:
                _SEEN.clear()
            _SEEN[ifname] = (msi, table, seen)
    elif dev is None and queue_dirs is not None:
        seen = ()  # a software device: no IRQ is looked at
    else:
        return None
    nl = None
    if answers is not None:  # the attributes map_by_netlink reads
        nl = tuple(tuple(tuple(r.get(k, _MISSING) for k in _NL_KEYS) for r in rows) for rows in answers)
    dirs = None
    if queue_dirs is not None:
        kept = _DIRS.get(ifname)
        if kept is not None and kept[0] is queue_dirs:
            dirs = kept[1]  # a kept listing's parse (the same list): its tuple made once
        else:
            dirs = tuple(queue_dirs)
            if len(_DIRS) >= _MAPS_MAX:
                _DIRS.clear()
            _DIRS[ifname] = (queue_dirs, dirs)
    return (ifname, dev, dirs, seen, nl)


# by interface: (msi vectors, names table, the key's part made of them) and (queue
# listing, its tuple), given again while the same objects come (identity, not equality)
_SEEN: dict[str, tuple[frozenset[int], Mapping[int, Irq], tuple]] = {}
_DIRS: dict[str, tuple[list[tuple[str, int]], tuple[tuple[str, int], ...]]] = {}


def _map_pure(ifname: str, irqs: InterruptTable, dev: DeviceIrqs | None,
              queue_dirs: list[tuple[str, int]] | None,
              answers: tuple[list[dict], list[dict]] | None) -> QueueMap:
    napi_ids = None
    if answers is not None:
        queues, napis = answers
        napi_ids = {(q["type"], q["id"]): q["napi_id"] for q in queues
                    if "napi_id" in q and q.get("type") in ("rx", "tx") and "id" in q}
    by_name = map_by_names(ifname, irqs, dev, queue_dirs, napi_ids)
    if answers is not None:
        by_nl = map_by_netlink(ifname, answers[0], answers[1], by_name)
        if by_nl is not None:
            return by_nl
    return by_name


def map_queues(root: SysRoot, ifname: str, irqs: InterruptTable,
               nl: NetdevNetlink | None) -> tuple[QueueMap, list[Problem]]:
    """The queue → IRQ map of one interface (netlink first when `nl` is given and live)."""
    problems: list[Problem] = []
    answers = None
    if nl is not None and root.live:
        ifindex = _ifindex(root, ifname)
        if ifindex is not None:
            answers = _netlink_answers(nl, ifindex, ifname, problems)
    return _map_one(root, ifname, irqs, answers, problems), problems


def map_all(root: SysRoot, ifnames: Iterable[str], irqs: InterruptTable,
            nl: NetdevNetlink | None,
            listings: QueueListings | None = None,
            ifindexes: Mapping[str, int] | None = None,
            asked: NetdevAnswers | None = None, now: float = 0.0,
            devices: DeviceLinks | None = None) -> tuple[dict[str, QueueMap], list[Problem]]:
    """Queue maps of several interfaces, with one netlink dump for all of them (and the
    tick's queue listings, when given). `ifindexes`: the interfaces' indexes as the
    tick's link dump gave them (else each is read from sysfs, one open per interface).
    `asked`: the caller's `NetdevAnswers`, which keeps the dumps' answers while nothing
    they describe seems to have changed (at monotonic time `now`); without it they are
    asked every call. `devices`: the caller's `DeviceLinks`, which keeps where each
    interface's device sits (with `ifindexes`); without it that is resolved every call."""
    problems: list[Problem] = []
    names = list(ifnames)
    if devices is not None and ifindexes is not None:
        devices.resolved = 0
        inputs = {name: _inputs(root, name, irqs, problems, listings, devices, ifindexes.get(name))
                  for name in names}
        devices.keep_only({(name, ifindexes[name]) for name in names if ifindexes.get(name) is not None})
    else:
        inputs = {name: _inputs(root, name, irqs, problems, listings) for name in names}
    grouped: dict[int, tuple[list[dict], list[dict]]] | None = None
    index: dict[str, int | None] = {}
    if nl is not None and root.live and names:
        for name in names:
            ifindex = ifindexes.get(name) if ifindexes is not None else None
            index[name] = ifindex if ifindex is not None else _ifindex(root, name)
        if asked is not None:
            key = tuple((name, index[name], *inputs[name]) for name in names)
            grouped = asked.get(nl, key, now, problems)
        else:
            grouped = _ask_grouped(nl, problems)
    if len(_SEEN) > len(names) or len(_DIRS) > len(names):
        # interfaces gone: their kept parts go (a names table of 16,384 IRQs each)
        for kept in (_SEEN, _DIRS):
            for gone in [k for k in kept if k not in inputs]:
                del kept[gone]
    out: dict[str, QueueMap] = {}
    for name in names:
        mine = None
        if grouped is not None:
            ifindex = index[name]
            mine = grouped.get(ifindex, ([], [])) if ifindex is not None else None
        queue_dirs, dev = inputs[name]
        out[name] = _map_from(name, irqs, dev, queue_dirs, mine)
    return out, problems


def _ask_grouped(nl: NetdevNetlink, problems: list[Problem]) -> dict[int, tuple[list[dict], list[dict]]] | None:
    """Both netdev dumps (every interface's queues and NAPIs), grouped by ifindex."""
    answers = _netlink_answers(nl, None, "all interfaces", problems)
    if answers is None:
        return None
    grouped: dict[int, tuple[list[dict], list[dict]]] = {}
    for i, rows in enumerate(answers):
        for row in rows:
            grouped.setdefault(row.get("ifindex", -1), ([], []))[i].append(row)
    return grouped


NETDEV_REFRESH_S = 10.0  # the netdev dumps are asked again at least this often


class NetdevAnswers:
    """The netdev genetlink queue and NAPI dumps, asked again when what they describe may
    have changed, not every tick.

    Which NAPI serves a queue and which IRQ a NAPI fires on change when the device's
    queues are reconfigured (`ethtool -L/-G`, XDP attached, a reset, a driver reload), and
    nearly all of that shows in what the tick reads anyway: the interfaces and their
    ifindexes, each one's queue listing (queues/rx-N, tx-N) and its device's MSI vectors
    (msi_irqs/). So the last answers are kept while those are equal, and asked again when
    any differs, when nettop itself changed an interface or an IRQ (`notice`, from the
    pipeline's journal watch, as the settings rotation has it), and at least every
    `refresh_s` seconds: a reset by another tool that keeps every queue and vector (new
    NAPI ids on the same IRQs) shows within that time. An answer that failed is asked
    again the next tick; an old kernel without the family is not asked again. Not
    thread-safe except `notice`.
    """

    def __init__(self, refresh_s: float = NETDEV_REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self._key: tuple | None = None
        self._t = 0.0
        self._grouped: dict[int, tuple[list[dict], list[dict]]] | None = None
        self._lock = threading.Lock()
        self._noticed = False
        self._unsupported = False
        self.asked = 0  # dumps asked on the last call: 0 or 2 (a test's figure)

    def notice(self) -> None:
        """Ask again on the next tick (nettop changed an interface or an IRQ)."""
        with self._lock:
            self._noticed = True

    def get(self, nl: NetdevNetlink, key: tuple, now: float,
            problems: list[Problem]) -> dict[int, tuple[list[dict], list[dict]]] | None:
        """The dumps grouped by ifindex: kept, or asked now."""
        with self._lock:
            dirty, self._noticed = self._noticed, False
        self.asked = 0
        if self._unsupported:
            return None
        if not dirty and key == self._key and 0 <= now - self._t < self.refresh_s:
            return self._grouped
        from nettop.kernel.netdev_genl import NetdevUnsupported

        self.asked = 2
        try:
            answers = nl.queues(None), nl.napis(None)
        except NetdevUnsupported:
            self._unsupported = True
            return None
        except Exception as exc:  # noqa: BLE001 - a netlink failure must not stop the tick
            self._key = None  # asked again next tick
            problems.append(Problem("netdev genetlink all interfaces",
                                    f"cannot ask netdev genetlink for the queues of all interfaces: {exc}; "
                                    "queue IRQs come from driver naming instead"))
            return None
        grouped: dict[int, tuple[list[dict], list[dict]]] = {}
        for i, rows in enumerate(answers):
            for row in rows:
                grouped.setdefault(row.get("ifindex", -1), ([], []))[i].append(row)
        self._key, self._t, self._grouped = key, now, grouped
        return grouped
