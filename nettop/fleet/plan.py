"""A tuning plan: what nettop changed on this host, portable to the next boot and to other hosts.

Built from the journal: for every setting changed this epoch whose live value differs
from the value nettop found, the setting (as the journal records it) and its value now.
Names that do not survive a reboot or another host are stored with what does: an
interface by its driver, PCI address and MAC address (a renamed NIC still matches); an
IRQ by the queue it serves (`eth0 rx-3`) and its action name, since IRQ numbers change
between boots. The host's layout (online CPUs, NUMA nodes, each NIC's node) goes with
it, so `nettop apply` can refuse a plan made for other hardware.

The file is JSON with a version; every field is checked on load and a bad file is one
line naming the field (PlanError).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from nettop.actions.base import ActionError, from_record
from nettop.collectors.cpus import format_cpu_list, parse_cpu_list, parse_cpu_mask, read_online_cpus
from nettop.kernel.sysroot import LIVE

PLAN_VERSION = 1
MAX_PLAN_BYTES = 4 << 20  # a plan is a few KB; anything near this is not one


class PlanError(Exception):
    """One line: what is wrong with the plan or why this host cannot take it."""


@dataclass(frozen=True)
class Iface:
    """How to find an interface again: hardware NICs by driver + PCI address, else MAC."""

    name: str
    driver: str | None
    bus_info: str | None  # PCI address; None for virtual devices
    mac: str | None
    numa_node: int | None

    @property
    def hardware(self) -> bool:
        return self.bus_info is not None


@dataclass(frozen=True)
class Item:
    kind: str
    params: dict[str, Any]
    value: Any
    was: Any  # the value nettop found, for the record
    text: str  # "rps_cpus eth0 rx-0: 0 → 2 (CPUs 1)"
    iface: str | None = None  # the plan's interface this item belongs to
    irq_queue: str | None = None  # irq_affinity: the queue its IRQ serves ("rx-3")
    irq_name: str | None = None  # irq_affinity: /proc/interrupts action name


@dataclass(frozen=True)
class TuningPlan:
    host: str
    kernel: str
    created: float
    cpus_online: tuple[int, ...]
    numa_nodes: int
    interfaces: dict[str, Iface] = field(default_factory=dict)
    items: tuple[Item, ...] = ()

    def to_json(self) -> str:
        doc = {"nettop_plan": PLAN_VERSION, "host": self.host, "kernel": self.kernel, "created": self.created,
               "cpus_online": list(self.cpus_online), "numa_nodes": self.numa_nodes,
               "interfaces": {n: asdict(i) for n, i in self.interfaces.items()},
               "items": [asdict(i) for i in self.items]}
        return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


# --- reading the host --------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(4096).strip()
    except OSError:
        return None


def online_cpus() -> tuple[int, ...]:
    cpus, _ = read_online_cpus(LIVE)
    return cpus


def numa_nodes() -> int:
    text = _read("/sys/devices/system/node/online")
    try:
        return len(parse_cpu_list(text)) if text else 1
    except ValueError:
        return 1


def iface_identity(name: str) -> Iface:
    from nettop.collectors.device_info import read_device_info

    info, _ = read_device_info(LIVE, name)
    base = f"/sys/class/net/{name}"
    hardware = os.path.lexists(f"{base}/device") and info.bus_info is not None and ":" in (info.bus_info or "")
    return Iface(name, info.driver, info.bus_info if hardware else None, _read(f"{base}/address"),
                 info.numa_node)


def _irq_queue(irq: int) -> tuple[str | None, str | None, str | None]:
    """(interface, queue, action name) of an IRQ from nettop's queue maps."""
    from nettop.collectors.interrupts import read_interrupts
    from nettop.collectors.queue_irqs import map_queues

    table, _ = read_interrupts(LIVE)
    entry = table.irqs.get(irq)
    name = entry.name if entry is not None else None
    for ifname in sorted(os.listdir("/sys/class/net")):
        qmap, _ = map_queues(LIVE, ifname, table, None)
        for q in qmap.queues:
            if irq in q.irqs:
                return ifname, f"{q.kind}-{q.index}", name
    return None, None, name


def portable(kind: str, value: Any) -> Any:
    """RPS/XPS masks as a CPU list ("1,3"; "0" for off): a mask as sysfs prints it is as
    wide as the host's nr_cpu_ids, and a bare "2" would read as CPU 2 when typed back."""
    if kind in ("rps_cpus", "xps_cpus") and isinstance(value, str):
        try:
            cpus = parse_cpu_mask(value)
        except ValueError:
            return value
        return format_cpu_list(cpus) if cpus else "0"
    return value


def from_journal(tuner: Any) -> TuningPlan:
    """The plan of what the journal changed and is still different from what nettop found."""
    st = tuner.state()
    items: list[Item] = []
    ifaces: dict[str, Iface] = {}
    for key, first in st.originals().items():
        try:
            setting = from_record(first.setting)
            now = setting.read()
        except (ActionError, OSError):
            continue  # gone (an interface removed, an IRQ freed): nothing to carry over
        if now == first.before:
            continue
        params = dict(first.setting["params"])
        iface = params.get("ifname")
        irq_queue = irq_name = None
        if first.setting["kind"] == "irq_affinity":
            iface, irq_queue, irq_name = _irq_queue(int(params["irq"]))
        if iface and iface not in ifaces:
            ifaces[iface] = iface_identity(iface)
        text = f"{key}: {setting.show(first.before)} → {setting.show(now)}"
        items.append(Item(first.setting["kind"], params, portable(first.setting["kind"], now),
                          portable(first.setting["kind"], first.before), text, iface, irq_queue, irq_name))
    return TuningPlan(socket.gethostname(), os.uname().release, time.time(), online_cpus(), numa_nodes(),
                      ifaces, tuple(items))


# --- loading a plan ----------------------------------------------------------------------

def _need(doc: dict[str, Any], key: str, types: type | tuple[type, ...], where: str = "plan") -> Any:
    v = doc.get(key)
    if not isinstance(v, types) or isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise PlanError(f"{where}: field {key!r} is missing or not a {getattr(types, '__name__', types)}; "
                        "export the plan again with `nettop persist`")
    return v


def loads(text: str, source: str = "plan") -> TuningPlan:
    if len(text) > MAX_PLAN_BYTES:
        raise PlanError(f"{source} is {len(text):,} bytes: not a nettop plan (they are a few KB)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{source} is not JSON ({exc.msg} at line {exc.lineno}); give a plan.json from `nettop persist`") from None
    except (ValueError, RecursionError):
        raise PlanError(f"{source} is not JSON; give a plan.json from `nettop persist`") from None
    if not isinstance(doc, dict) or "nettop_plan" not in doc:
        raise PlanError(f"{source} is not a nettop plan (no 'nettop_plan' field); give a plan.json from `nettop persist`")
    if doc["nettop_plan"] != PLAN_VERSION:
        raise PlanError(f"{source} is plan version {str(doc['nettop_plan'])[:20]}; this nettop reads version {PLAN_VERSION}")
    cpus = _need(doc, "cpus_online", list)
    if not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 65536 for c in cpus):
        raise PlanError(f"{source}: cpus_online must be CPU numbers")
    ifaces = {}
    for name, d in _need(doc, "interfaces", dict).items():
        if not isinstance(d, dict):
            raise PlanError(f"{source}: interface {name[:40]!r} is not an object")
        texts = [d.get(k) for k in ("driver", "bus_info", "mac")]
        node = d.get("numa_node")
        if not all(t is None or isinstance(t, str) and len(t) < 200 for t in texts) or not (
                node is None or isinstance(node, int) and not isinstance(node, bool)):
            raise PlanError(f"{source}: interface {name[:40]!r} is malformed")
        ifaces[name] = Iface(name, texts[0], texts[1], texts[2], node)
    items = []
    for n, d in enumerate(_need(doc, "items", list)):
        where = f"{source} item {n + 1}"
        if not isinstance(d, dict):
            raise PlanError(f"{where} is not an object")
        kind = _need(d, "kind", str, where)
        params = _need(d, "params", dict, where)
        if "value" not in d:
            raise PlanError(f"{where}: no value")
        iface = d.get("iface")
        if iface is not None and iface not in ifaces:
            raise PlanError(f"{where} names interface {str(iface)[:40]!r}, which the plan does not describe")
        items.append(Item(kind, params, d["value"], d.get("was"), str(d.get("text", kind))[:300], iface,
                          d.get("irq_queue"), d.get("irq_name")))
    nodes = _need(doc, "numa_nodes", int)
    return TuningPlan(str(doc.get("host", "?"))[:100], str(doc.get("kernel", "?"))[:100],
                      float(doc.get("created", 0) or 0), tuple(cpus), nodes, ifaces, tuple(items))


def load(path: str) -> TuningPlan:
    import sys

    try:
        if path == "-":
            text = sys.stdin.read(MAX_PLAN_BYTES + 1)
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PlanError(f"{path} is not UTF-8 text: not a nettop plan") from None
    return loads(text, "stdin" if path == "-" else path)
