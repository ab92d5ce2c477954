"""Pure parsers of the command outputs a `sos report` (or `nettop capture`) keeps as text:
`ethtool -k IF`, `ethtool -S IF`, `tc -s qdisc show` and `ip -s -d link`.

Live, nettop asks the kernel over netlink and the ethtool ioctl; a captured host has only
what these commands printed, in the wording of whichever ethtool/iproute2 version ran
them. Every parser here is tolerant: it keeps the lines it understands and skips the
rest, never raising on damaged or unknown text (the caller says when a file gave nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

# `ethtool -k` long names of the offloads nettop shows -> the short names used live
_FEATURE_NAMES = {
    "generic-receive-offload": "gro",
    "generic-segmentation-offload": "gso",
    "tcp-segmentation-offload": "tso",
}
_MAX64 = (1 << 64) - 1


def _int(text: str) -> int | None:
    text = text.strip()
    if text.isascii() and text.isdigit() and len(text) <= 20:
        n = int(text)
        return n if n <= _MAX64 else None
    return None


def parse_features(text: str) -> dict[str, bool]:
    """`ethtool -k` text -> {"gro": True, "gso": True, "tso": False} (those it printed)."""
    out: dict[str, bool] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        short = _FEATURE_NAMES.get(name.strip())
        if not sep or short is None:
            continue
        word = value.split()[0] if value.split() else ""
        if word in ("on", "off"):
            out.setdefault(short, word == "on")
    return out


def parse_ethtool_stats(text: str) -> list[tuple[str, int]]:
    """`ethtool -S` text -> [(name, value)] in the driver's order. Names may hold ": "
    themselves (bnxt's "[0]: rx_ucast_packets"), so the value is what follows the last
    colon; section titles ("NIC statistics:", "Standard stats ...") have no value."""
    out: list[tuple[str, int]] = []
    for line in text.splitlines():
        name, sep, value = line.strip().rpartition(":")
        n = _int(value)
        if sep and name and n is not None:
            out.append((name.strip(), n))
    return out


@dataclass(frozen=True, slots=True)
class TcQdisc:
    """One qdisc of `tc -s qdisc show`, with the counters its Sent/backlog lines gave."""

    ifname: str
    kind: str
    handle: str
    parent: str  # "root", "ingress" or the parent class "8001:3"
    bytes: int | None = None
    packets: int | None = None
    drops: int | None = None
    overlimits: int | None = None
    requeues: int | None = None
    backlog_bytes: int | None = None
    backlog_packets: int | None = None


_QDISC_HEAD = re.compile(r"^qdisc\s+(\S+)\s+(\S+)\s+dev\s+(\S+)\s+(root|ingress|parent\s+\S+)")
_SENT = re.compile(r"Sent\s+(\d+)\s+bytes\s+(\d+)\s+pkts?\s+\(dropped\s+(\d+),\s*overlimits\s+(\d+)"
                   r"(?:\s+requeues\s+(\d+))?")
_BACKLOG = re.compile(r"backlog\s+(\d+)([KMG]?)b\s+(\d+)p(?:\s+requeues\s+(\d+))?")
_UNIT = {"": 1, "K": 1000, "M": 1000_000, "G": 1000_000_000}


def parse_tc_qdiscs(text: str) -> list[TcQdisc]:
    """`tc -s qdisc show` text -> its qdiscs in the order printed. Old iproute2 prints
    `requeues` on the Sent line, newer ones on the backlog line too; a backlog tc printed
    rounded ("12Kb") is kept at the unit's value."""
    out: list[TcQdisc] = []
    cur: dict[str, object] | None = None

    def flush() -> None:
        if cur is not None:
            # cur holds TcQdisc's own field names with values of their types (set below);
            # a dict[str, object] cannot say so
            out.append(TcQdisc(**cur))  # type: ignore[arg-type]

    for line in text.splitlines():
        m = _QDISC_HEAD.match(line)
        if m:
            flush()
            kind, handle, ifname, where = m.groups()
            parent = where.split()[1] if where.startswith("parent") else where
            cur = {"ifname": ifname, "kind": kind, "handle": handle, "parent": parent}
            continue
        if cur is None:
            continue
        s = _SENT.search(line)
        if s:
            cur.update(bytes=int(s.group(1)), packets=int(s.group(2)), drops=int(s.group(3)),
                       overlimits=int(s.group(4)))
            if s.group(5) is not None:
                cur["requeues"] = int(s.group(5))
            continue
        b = _BACKLOG.search(line)
        if b:
            cur.update(backlog_bytes=int(b.group(1)) * _UNIT[b.group(2)],
                       backlog_packets=int(b.group(3)))
            if b.group(4) is not None:
                cur["requeues"] = int(b.group(4))
    flush()
    return out


@dataclass(frozen=True, slots=True)
class IpLink:
    """One interface of `ip -s -d link`: what sysfs in a sosreport does not hold."""

    name: str
    ifindex: int
    mtu: int | None = None
    txqueuelen: int | None = None
    state: str | None = None  # "UP", "DOWN", "UNKNOWN" as ip prints it
    kind: str | None = None  # the -d line's link kind: "veth", "bond", "bridge", ...
    master: str | None = None
    num_tx_queues: int | None = None
    num_rx_queues: int | None = None
    # RX: bytes packets errors dropped ...; TX: bytes packets errors dropped ...
    counters: Mapping[str, int] = field(default_factory=dict)


_LINK_HEAD = re.compile(r"^(\d+):\s+([^:@\s]+)(?:@\S+)?:\s+<[^>]*>(.*)$")
_KINDS = ("veth", "bond", "bridge", "team", "vlan", "vxlan", "macvlan", "ipvlan", "ifb",
          "dummy", "tun", "geneve", "gre", "ipip", "sit", "wireguard", "openvswitch")
_COUNTER_NAMES = {"bytes": "bytes", "packets": "packets", "errors": "errors", "dropped": "dropped"}


def _after(words: list[str], key: str) -> str | None:
    for i, w in enumerate(words[:-1]):
        if w == key:
            return words[i + 1]
    return None


def parse_ip_link(text: str) -> dict[str, IpLink]:
    """`ip -s -d link` text -> {name: IpLink}. Counter lines follow their titles
    ("RX:  bytes packets errors dropped  missed   mcast"), matched by column name so
    iproute2 versions with other columns (overrun, missed, nohandler) still parse."""
    out: dict[str, IpLink] = {}
    cur: dict[str, object] | None = None
    counters: dict[str, int] = {}
    title: tuple[str, list[str]] | None = None

    def flush() -> None:
        if cur is not None:
            # cur holds IpLink's own field names with values of their types (set below);
            # a dict[str, object] cannot say so
            link = IpLink(counters=dict(counters), **cur)  # type: ignore[arg-type]
            out.setdefault(str(cur["name"]), link)

    for line in text.splitlines():
        m = _LINK_HEAD.match(line)
        if m:
            flush()
            counters = {}
            title = None
            words = m.group(3).split()
            cur = {"name": m.group(2), "ifindex": int(m.group(1)) if len(m.group(1)) <= 10 else 0,
                   "mtu": _int(_after(words, "mtu") or ""),
                   "txqueuelen": _int(_after(words, "qlen") or ""),
                   "state": _after(words, "state"), "master": _after(words, "master")}
            continue
        if cur is None:
            continue
        words = line.split()
        if not words:
            continue
        if words[0] in ("RX:", "TX:"):
            title = (words[0][:2].lower(), words[1:])
            continue
        if title is not None:
            values = [_int(w) for w in words]
            if values and all(v is not None for v in values):
                prefix, names = title
                for name, v in zip(names, values):
                    if name in _COUNTER_NAMES and v is not None:
                        counters[f"{prefix}_{name}"] = v
                title = None
                continue
            title = None
        for key, attr in (("numtxqueues", "num_tx_queues"), ("numrxqueues", "num_rx_queues")):
            v = _int(_after(words, key) or "")
            if v is not None:
                cur[attr] = v
        if cur.get("kind") is None:  # on its own -d line, or after link/ether on old ones
            kinds = [w for w in words if w in _KINDS]
            if kinds:
                cur["kind"] = kinds[0]
    flush()
    return out


_UP_UNITS = {"year": 365 * 86400, "week": 7 * 86400, "day": 86400, "hour": 3600, "min": 60, "minute": 60}
_UP_PART = re.compile(r"^(\d{1,6})\s+(year|week|day|hour|minute|min)s?$")
_UP_CLOCK = re.compile(r"^(\d{1,6}):([0-5]\d)$")


def parse_uptime(text: str) -> float | None:
    """Seconds since boot, to the minute, from the `uptime` command's text as sos's host
    plugin keeps it (" 01:05:28 up 3 days,  4:20,  2 users,  load average: ...", "up 5 min",
    "up 1 day, 20 min", or `uptime -p`'s "up 2 weeks, 3 hours, 1 minute"); None when the
    text says none of these. No sos plugin copies /proc/uptime, and without a time since
    boot a single sosreport gives totals only."""
    for line in text.splitlines():
        head, sep, rest = line.partition(" up ")
        if not sep and line.startswith("up "):
            rest, sep = line[3:], "up"
        if not sep:
            continue
        seconds, seen = 0, False
        for part in rest.split(","):
            part = " ".join(part.split())
            if not part or "user" in part or "load average" in part:
                break
            m = _UP_CLOCK.match(part)
            if m:
                seconds += int(m.group(1)) * 3600 + int(m.group(2)) * 60
                seen = True
                continue
            m = _UP_PART.match(part)
            if m is None:
                seen = False  # a word we do not know: the figure would be wrong
                break
            seconds += int(m.group(1)) * _UP_UNITS[m.group(2)]
            seen = True
        if seen and 0 < seconds < 1e10:
            return float(seconds)
    return None
