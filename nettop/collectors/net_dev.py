"""Interface counters from /proc/net/dev, the source a captured tree may hold instead of sysfs.

Live, nettop asks rtnetlink; in a captured tree it reads each interface's sysfs
`statistics/`. Captures often lack those folders (tarballs of /proc only, sosreports
that copy a few sysfs files) but keep /proc/net/dev, which lists every interface of the
namespace (lo, bridges, veths included) with the counters of `ip -s link`:

    Inter-|   Receive                                                |  Transmit
     face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
        lo: 1175363    3162    0    3    0     0          0         0  1175363 ...

The kernel (net/core/net-procfs.c) prints rx `drop` as rx_dropped + rx_missed_errors
and tx `drop` as tx_dropped; `errs` are rx_errors / tx_errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from nettop.collectors.numbers import decimal
from nettop.model.problems import Problem, malformed
from nettop.kernel.sysroot import SysRoot

NET_DEV = "proc/net/dev"
_SRC = "/proc/net/dev"
_FIELDS = 16


@dataclass(frozen=True, slots=True)
class NetDevRow:
    """One interface's line of /proc/net/dev (the counters LinkStats carries)."""

    name: str
    rx_bytes: int
    rx_packets: int
    rx_errors: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_dropped: int


def parse_net_dev(text: str) -> tuple[dict[str, NetDevRow], list[Problem]]:
    """Rows by interface name; a line that is not `name: 16 decimal numbers` is a Problem."""
    out: dict[str, NetDevRow] = {}
    problems: list[Problem] = []
    for line in text.splitlines():
        if "|" in line or not line.strip():
            continue  # the two header lines
        name, colon, rest = line.partition(":")
        name = name.strip()
        try:
            if not colon or not name:
                raise ValueError("no 'name:' at the start")
            parts = rest.split()
            if len(parts) < _FIELDS:
                raise ValueError(f"{len(parts)} numbers, expected {_FIELDS}")
            v = [decimal(p, 64, "counter") for p in parts[:_FIELDS]]
        except ValueError as exc:
            problems.append(malformed(_SRC, f"{line.strip()[:60]!r} ({exc})"))
            continue
        if name in out:
            problems.append(Problem(_SRC, f"{_SRC} lists {name} twice; the first line is used"))
            continue
        out[name] = NetDevRow(name, rx_bytes=v[0], rx_packets=v[1], rx_errors=v[2],
                              rx_dropped=v[3], tx_bytes=v[8], tx_packets=v[9],
                              tx_errors=v[10], tx_dropped=v[11])
    return out, problems


def read_net_dev(root: SysRoot) -> tuple[dict[str, NetDevRow] | None, list[Problem]]:
    """Rows of `root`'s /proc/net/dev; None (and no Problem: the caller says what it
    lacked) when the capture does not hold the file."""
    try:
        text = root.read_text(NET_DEV)
    except OSError:
        return None, []
    return parse_net_dev(text)
