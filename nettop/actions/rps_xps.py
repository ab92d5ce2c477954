"""Per-queue steering: RPS (`rps_cpus`), RFS (`rps_flow_cnt` and the global
`rps_sock_flow_entries`) and XPS (`xps_cpus`).

Masks are written exactly as sysfs prints them (`format_cpu_mask` with nr_cpu_ids), so
the read-back compares as text. The kernel rounds both RFS table sizes up to a power of
two; the read-back is checked against the rounded value, and an empty mask ("0") turns
RPS or XPS off, which is allowed.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from nettop.actions.base import (ActionError, Change, Setting, Value, need_iface, parse_int,
                                 read_file, register, write_file)
from nettop.actions.irq import check_cpus, nr_cpu_ids
from nettop.collectors.cpus import format_cpu_list, format_cpu_mask, parse_cpu_mask

FLOW_MAX = 1 << 29  # the kernel refuses larger RFS tables (RPS_MAP / flow table limits)


def _pow2(n: int) -> int:
    return 0 if n == 0 else 1 << (n - 1).bit_length()


@dataclass(frozen=True, slots=True)
class _QueueFile(Setting):
    ifname: str
    queue: int

    direction = "rx"
    fname = ""

    @property
    def key(self) -> str:
        return f"{self.fname} {self.ifname} {self.direction}-{self.queue}"

    @property
    def path(self) -> str:
        return f"/sys/class/net/{self.ifname}/queues/{self.direction}-{self.queue}/{self.fname}"

    def _check(self) -> None:
        need_iface(self.ifname)
        if not os.path.exists(self.path):
            qdir = os.path.dirname(self.path)
            if not os.path.isdir(qdir):
                n = len([d for d in os.listdir(f"/sys/class/net/{self.ifname}/queues")
                         if d.startswith(self.direction + "-")])
                raise ActionError(f"{self.ifname} has no queue {self.direction}-{self.queue} "
                                  f"(it has {self.direction}-0 to {self.direction}-{n - 1})", errno.ENOENT)
            raise ActionError(f"{self.ifname} {self.direction}-{self.queue} has no {self.fname} "
                              "(kernel built without CONFIG_RPS/CONFIG_XPS?)", errno.ENOENT)

    def read(self) -> Value:
        return read_file(self.path)

    def write(self, value: Value) -> None:
        write_file(self.path, str(value))

    def explain(self, exc: OSError) -> str:
        if exc.errno == errno.ENOENT or exc.errno == errno.ENODEV:
            return f"{self.key}: {self.ifname} or its queue vanished ({errno.errorcode[exc.errno]})"
        return super(_QueueFile, self).explain(exc)


@dataclass(frozen=True, slots=True)
class _MaskFile(_QueueFile):
    def normalize(self, value: Value) -> Value:
        self._check()
        text = str(value).strip()
        cpus = () if text in ("0", "") else check_cpus(self.key, text)
        return format_cpu_mask(cpus, nr_cpu_ids())

    def matches(self, requested: Value, after: Value) -> bool:
        try:
            return parse_cpu_mask(str(requested)) == parse_cpu_mask(str(after))
        except ValueError:
            return False

    def show(self, value: Value) -> str:
        try:
            cpus = parse_cpu_mask(str(value))
        except ValueError:
            return str(value)
        return f"{value} (CPUs {format_cpu_list(cpus)})" if cpus else f"{value} (off)"


@register
@dataclass(frozen=True, slots=True)
class RpsCpus(_MaskFile):
    kind = "rps_cpus"
    direction = "rx"
    fname = "rps_cpus"


@register
@dataclass(frozen=True, slots=True)
class XpsCpus(_MaskFile):
    kind = "xps_cpus"
    direction = "tx"
    fname = "xps_cpus"

    def explain(self, exc: OSError) -> str:
        if exc.errno == errno.EINVAL:
            return (f"{self.key}: the kernel refused the mask (EINVAL); XPS needs a multi-queue "
                    "device, and CPUs it knows")
        return _MaskFile.explain(self, exc)


@register
@dataclass(frozen=True, slots=True)
class RpsFlowCnt(_QueueFile):
    kind = "rps_flow_cnt"
    direction = "rx"
    fname = "rps_flow_cnt"

    def read(self) -> Value:
        return int(read_file(self.path))

    def normalize(self, value: Value) -> Value:
        self._check()
        return parse_int(self.key, value, 0, FLOW_MAX)

    def matches(self, requested: Value, after: Value) -> bool:
        return after == _pow2(int(requested))


def rps_all(ifname: str, cpus: str) -> list[Change]:
    """The same rps_cpus on every rx queue of an interface."""
    return [Change(RpsCpus(ifname, q), cpus) for q in rx_queues(ifname)]


def rx_queues(ifname: str) -> list[int]:
    need_iface(ifname)
    names = os.listdir(f"/sys/class/net/{ifname}/queues")
    return sorted(int(n[3:]) for n in names if n.startswith("rx-"))


def rfs(ifname: str, entries: int, flow_cnt: int | None = None) -> list[Change]:
    """RFS on: the global socket flow table and each rx queue's share of it."""
    from nettop.actions.sysctl import Sysctl

    queues = rx_queues(ifname)
    per_queue = flow_cnt if flow_cnt is not None else (entries // max(1, len(queues)) if entries else 0)
    return [Change(Sysctl("net.core.rps_sock_flow_entries"), str(entries)),
            *(Change(RpsFlowCnt(ifname, q), per_queue) for q in queues)]


def toggle_cpu(mask: str, cpu: int, ncpus: int) -> str:
    """The mask with one CPU flipped, as sysfs prints it (the TUI's mask editor): ("3", 1, 2) -> "1"."""
    cpus = set(parse_cpu_mask(mask))
    cpus ^= {cpu}
    return format_cpu_mask(cpus, ncpus)
