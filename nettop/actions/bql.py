"""Byte queue limits of one tx queue: `limit_max` and `limit_min`.

The kernel clamps both to DQL_MAX_LIMIT and keeps `limit` between them on its own; a
`limit_min` above `limit_max` is refused here, before the write, because the kernel would
take it and leave the pair inconsistent.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from nettop.actions.base import (ActionError, Setting, Value, need_iface, parse_int, read_file,
                                 register, valid_ifname, valid_queue, write_file)
from nettop.actions.typed import clip

DQL_MAX_LIMIT = 0x7FFFFFFF - 0x0FFFFFFF  # include/linux/dynamic_queue_limits.h: (UINT_MAX / 2) - DQL_MAX_OBJECT


@register
@dataclass(frozen=True, slots=True)
class BqlLimit(Setting):
    value_types = (int,)
    ifname: str
    queue: int
    which: str  # "limit_max" or "limit_min"
    kind = "bql"

    @property
    def key(self) -> str:
        return f"bql {self.which} {self.ifname} tx-{self.queue}"

    def _path(self, name: str) -> str:
        return self.root.join(f"sys/class/net/{self.ifname}/queues/tx-{self.queue}/byte_queue_limits/{name}")

    def read(self) -> Value:
        return int(read_file(self._path(self.which)))

    def validate(self) -> None:
        if self.which not in ("limit_max", "limit_min"):
            raise ActionError(f"BQL has limit_max and limit_min, not {clip(self.which)}")
        valid_ifname(self.ifname)
        valid_queue(self.queue)

    def normalize(self, value: Value) -> Value:
        self.validate()
        need_iface(self.ifname)
        if not os.path.exists(self._path(self.which)):
            raise ActionError(f"{self.ifname} tx-{self.queue} has no byte_queue_limits "
                              "(no such queue, or a kernel without CONFIG_BQL)", errno.ENOENT)
        n = parse_int(self.key, value, 0, DQL_MAX_LIMIT)
        other = "limit_min" if self.which == "limit_max" else "limit_max"
        o = int(read_file(self._path(other)))
        if (self.which == "limit_max" and n < o) or (self.which == "limit_min" and n > o):
            raise ActionError(f"{self.key}: {n} would put limit_min above limit_max "
                              f"({other} is {o}); change {other} first", errno.ERANGE)
        return n

    def write(self, value: Value) -> None:
        write_file(self._path(self.which), str(int(value)))
