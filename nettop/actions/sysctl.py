"""The curated net sysctls nettop may change, each with the range the kernel accepts.

Values are compared as the kernel prints them with whitespace folded ("4096 131072
6291456"), the same normalization the host-config collector uses, so the journal and the
Host panel show identical text. Only names on this list can be set: nettop is a network
tuner, not a general sysctl editor.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from nettop.actions.base import ActionError, Setting, Value, parse_int, read_file, register, write_file
from nettop.actions.typed import bare, clip, whole
from nettop.collectors.host_config import normalize, sysctl_path

INT_MAX = 2**31 - 1
# name -> (min, max) for one integer, or the number of integers for a triple
RANGES: dict[str, tuple[int, int]] = {
    "net.core.netdev_max_backlog": (1, INT_MAX),
    "net.core.netdev_budget": (1, INT_MAX),
    "net.core.netdev_budget_usecs": (0, INT_MAX),
    "net.core.dev_weight": (1, INT_MAX),
    "net.core.rmem_max": (0, INT_MAX),
    "net.core.wmem_max": (0, INT_MAX),
    "net.core.rmem_default": (0, INT_MAX),
    "net.core.wmem_default": (0, INT_MAX),
    "net.core.busy_poll": (0, INT_MAX),
    "net.core.busy_read": (0, INT_MAX),
    "net.core.rps_sock_flow_entries": (0, 1 << 29),
}
TRIPLES = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
QDISCS = ("pfifo_fast", "fq_codel", "fq", "cake", "sfq", "pfifo", "bfifo", "noqueue")
CURATED = (*RANGES, *TRIPLES, "net.core.default_qdisc")


def _pow2(n: int) -> int:
    return 0 if n == 0 else 1 << (n - 1).bit_length()


@register
@dataclass(frozen=True, slots=True)
class Sysctl(Setting):
    value_types = (str,)
    name: str
    kind = "sysctl"

    @property
    def key(self) -> str:
        return f"sysctl {self.name}"

    @property
    def path(self) -> str:
        return self.root.join(sysctl_path(self.name))

    def read(self) -> Value:
        return normalize(read_file(self.path))

    def validate(self) -> None:
        if self.name not in CURATED:
            raise ActionError(f"nettop does not set {bare(self.name)}; it sets {', '.join(CURATED)}")

    def normalize(self, value: Value) -> Value:
        self.validate()
        if not os.path.exists(self.path):
            raise ActionError(f"{self.name} does not exist on this kernel or in this network "
                              "namespace (some net.core sysctls exist only in the initial one)", errno.ENOENT)
        text = normalize(str(value))
        if self.name == "net.core.default_qdisc":
            if text not in QDISCS:
                raise ActionError(f"{self.name}: {clip(text)} is not a qdisc nettop knows; use one of {', '.join(QDISCS)}")
            return text
        parts = text.split()
        want = 3 if self.name in TRIPLES else 1
        nums = [n for p in parts if p.isascii() and p.isdigit() and (n := whole(p)) is not None]
        if len(parts) != want or len(nums) != want:
            raise ActionError(f"{self.name}: give {'three whole numbers (min default max)' if want == 3 else 'a whole number'} "
                              f"in ASCII digits, not {clip(text)}")
        if want == 3:
            if not (1 <= nums[0] <= nums[1] <= nums[2] <= INT_MAX):
                raise ActionError(f"{self.name}: needs 1 <= min <= default <= max <= {INT_MAX}, got {clip(text)}",
                                  errno.ERANGE)
            return " ".join(str(n) for n in nums)
        lo, hi = RANGES[self.name]
        return str(parse_int(self.name, parts[0], lo, hi))

    def write(self, value: Value) -> None:
        write_file(self.path, str(value))

    def matches(self, requested: Value, after: Value) -> bool:
        if self.name == "net.core.rps_sock_flow_entries":
            return str(after) == str(_pow2(int(requested)))
        return requested == after

    def explain(self, exc: OSError) -> str:
        if exc.errno == errno.ENOENT and self.name == "net.core.default_qdisc":
            return (f"{self.name}: this kernel has no such qdisc (ENOENT): load its module "
                    "(`modprobe sch_<name>`) or pick another qdisc")
        if exc.errno == errno.EINVAL:
            return f"{self.name}: the kernel refused the value (EINVAL): out of its range"
        return super(Sysctl, self).explain(exc)
