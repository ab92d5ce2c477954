"""Per-queue steering: RPS (`rps_cpus`), RFS (`rps_flow_cnt` and the global
`rps_sock_flow_entries`) and XPS (`xps_cpus`).

Masks are written exactly as sysfs prints them (`format_cpu_mask` with nr_cpu_ids), so
the read-back compares as text. The kernel rounds both RFS table sizes up to a power of
two; the read-back is checked against the rounded value. `0` or `none` (or an all-zero mask
typed out, `0x0`) turns RPS or XPS off; an empty text is refused like everywhere else.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from nettop.actions.base import (ActionError, Change, Setting, Value, need_iface, parse_int,
                                 read_file, register, valid_ifname, valid_queue, write_file)
from nettop.actions.irq import check_cpus, nr_cpu_ids
from nettop.actions.typed import MAX_TEXT, clip, parse_cpu_spec
from nettop.collectors.cpus import format_cpu_list, format_cpu_mask, parse_cpu_mask
from nettop.kernel.sysroot import LIVE, SysRoot

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
        return self.root.join(f"sys/class/net/{self.ifname}/queues/{self.direction}-{self.queue}/{self.fname}")

    def validate(self) -> None:
        valid_ifname(self.ifname)
        valid_queue(self.queue)

    def _check(self) -> None:
        self.validate()
        need_iface(self.ifname)
        if not os.path.exists(self.path):
            qdir = os.path.dirname(self.path)
            if not os.path.isdir(qdir):
                n = len([d for d in self.root.listdir(f"sys/class/net/{self.ifname}/queues")
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
    value_types = (str,)

    def normalize(self, value: Value) -> Value:
        self._check()
        text = value if isinstance(value, str) else str(value)
        if text.strip(" \t\n").lower() in OFF:
            cpus: tuple[int, ...] = ()
        else:
            cpus = check_cpus(self.key, text, allow_empty=True) if text.strip(" \t\n") else ()
            if not cpus and not _zero_mask(text):
                raise ActionError(f"{self.key}: the CPU set is empty; give CPUs (0-3,8 or a mask like f0), "
                                  f"or `0` / `none` to turn {self.fname[:3].upper()} off", errno.EINVAL)
        return format_cpu_mask(cpus, nr_cpu_ids())

    def matches(self, requested: Value, after: Value) -> bool:
        return _mask_cpus(requested) == _mask_cpus(after) is not None

    def show(self, value: Value) -> str:
        cpus = _mask_cpus(value)
        if cpus is None:
            return clip(value, 60) if not isinstance(value, str) or len(value) > 60 else value
        return f"{value} (CPUs {format_cpu_list(cpus)})" if cpus else f"{value} (off)"


OFF = ("0", "none")  # the explicit ways to turn RPS/XPS off; an empty text is refused


def _zero_mask(text: str) -> bool:
    """An all-zero hex mask typed out ("0x0", "00000000,00000000"): off, spelled as a mask."""
    try:
        spec = parse_cpu_spec(text)
    except ValueError:
        return False
    return spec.mask == 0


def _mask_cpus(value: Value) -> tuple[int, ...] | None:
    """The CPUs of a mask as sysfs prints it (bounded by the host's CPU ids), None if it is not one."""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        return None
    try:
        v = value.strip()
        return parse_cpu_spec(v if v.lower().startswith("0x") else "0x" + v).expand(nr_cpu_ids())
    except ValueError:
        return None


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
    value_types = (int,)
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


def rx_queues(ifname: str, root: SysRoot = LIVE) -> list[int]:
    need_iface(ifname, root)
    names = root.listdir(f"sys/class/net/{ifname}/queues")
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
