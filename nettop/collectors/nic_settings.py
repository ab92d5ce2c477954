"""Coalescing, ring sizes and channel counts read back through the ethtool ioctl.

Drivers without an operation (veth has no coalescing) give None for it: that is normal,
not a problem worth a line. Only the coalescing parameters operators tune are kept.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from nettop.model.problems import Problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from nettop.kernel.ethtool import Ethtool

COALESCE_SHOWN = ("adaptive-rx", "adaptive-tx", "rx-usecs", "rx-frames", "tx-usecs", "tx-frames")
_QUIET = (errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL, errno.ENOTSUP)


def read_nic_settings(ethtool: Ethtool, ifname: str) -> tuple[
        dict[str, int] | None, dict[str, int] | None, dict[str, int] | None, list[Problem]]:
    problems: list[Problem] = []

    def ask(what: str, fn: Callable[[str], dict[str, int]]) -> dict[str, int] | None:
        try:
            return fn(ifname)
        except OSError as exc:
            if exc.errno not in _QUIET:
                problems.append(Problem(f"ethtool {what} {ifname}",
                                        f"cannot read {what} of {ifname}: {exc.strerror or exc}"))
            return None

    co = ask("coalescing", ethtool.coalesce)
    if co is not None:
        co = {k: co[k] for k in COALESCE_SHOWN}
    rings = ask("rings", ethtool.rings)
    if rings is not None:
        rings = {k: v for k, v in rings.items() if k.startswith(("rx", "tx")) and "mini" not in k and "jumbo" not in k}
    ch = ask("channels", ethtool.channels)
    return co, rings, ch, problems
