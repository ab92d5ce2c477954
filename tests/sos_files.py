"""An independent reading of a `sos report` archive, for the tests that compare nettop with it.

Shares nothing with nettop/kernel/sos.py or nettop's collectors: a plain tar extraction and
a few lines of parsing per file, so that a figure nettop shows and the figure read here
agree only when both read the archive right (tests/test_sosreport.py on this host,
tests/vm_realdrv/test_sos_guest.py in the real-driver guest).
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

SOS_PLUGINS = "networking,kernel,processor"


def extract(arc: Path, out: Path) -> Path:
    """The archive's top directory, extracted here by plain tarfile (files, dirs, relative links)."""
    with tarfile.open(arc) as tar:
        for m in tar:
            if m.isfile() or m.isdir():
                tar.extract(m, out)
            elif m.issym() and not m.linkname.startswith("/"):
                tar.extract(m, out)
    (top,) = [d for d in out.iterdir() if d.is_dir()]
    return top


def kv(text: str, sep: str) -> dict[str, str]:
    """"key SEP value" lines -> {key: value}, the first of each key kept."""
    out = {}
    for line in text.splitlines():
        k, s, v = line.partition(sep)
        if s:
            out.setdefault(k.strip(), v.strip())
    return out


def ethtool_blocks(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(maximums, current) of `ethtool -g` / `ethtool -l` output."""
    head, _, cur = text.partition("Current hardware settings:")
    return kv(head.partition("Pre-set maximums:")[2], ":"), kv(cur, ":")


def n(v: str) -> int:
    """An ethtool value as the ioctl gives it: n/a and off are 0, on is 1."""
    return 0 if v in ("n/a", "off") else 1 if v == "on" else int(v)


def channels(text: str) -> dict[str, int]:
    mx, cur = ethtool_blocks(text)
    return {**{f"{k.lower()}-max": n(v) for k, v in mx.items()}, **{k.lower(): n(v) for k, v in cur.items()}}


def rings(text: str) -> dict[str, int]:
    mx, cur = ethtool_blocks(text)
    return {"rx-max": n(mx["RX"]), "tx-max": n(mx["TX"]), "rx": n(cur["RX"]), "tx": n(cur["TX"])}


def coalesce(text: str) -> dict[str, int]:
    pairs = kv(text, ":")
    m = re.search(r"Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)", text)
    assert m, text
    return {"adaptive-rx": n(m.group(1)), "adaptive-tx": n(m.group(2)),
            **{k: n(pairs[k]) for k in ("rx-usecs", "rx-frames", "tx-usecs", "tx-frames")}}


def proc_net_dev(top: Path) -> dict[str, list[int]]:
    """Interface -> the 16 numbers of its /proc/net/dev line."""
    out = {}
    for line in (top / "proc/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        out[name.strip()] = [int(x) for x in rest.split()]
    return out


NETDEV_COLUMN = {"rx_bytes": 0, "rx_packets": 1, "rx_errors": 2, "rx_dropped": 3,
                 "tx_bytes": 8, "tx_packets": 9, "tx_errors": 10, "tx_dropped": 11}


def softnet(top: Path) -> list[list[int]]:
    return [[int(x, 16) for x in line.split()] for line in (top / "proc/net/softnet_stat").read_text().splitlines()]


def softirqs(top: Path) -> dict[str, list[int]]:
    return {line.split(":")[0].strip(): [int(x) for x in line.split(":")[1].split()]
            for line in (top / "proc/softirqs").read_text().splitlines()[1:]}


def interrupts(top: Path) -> dict[str, tuple[str, list[int]]]:
    """IRQ label -> (action name, per-CPU counts) from the archive's /proc/interrupts."""
    lines = (top / "proc/interrupts").read_text().splitlines()
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        fields = rest.split()
        if head.strip().isdigit():
            out[head.strip()] = (fields[-1], [int(x) for x in fields[:ncpu]])
    return out


def ip_links(top: Path) -> dict[str, dict[str, int | str]]:
    """Interface -> ifindex, mtu, operstate (lower case), txqueuelen from `ip -s -d link`."""
    out: dict[str, dict[str, int | str]] = {}
    for line in (top / "sos_commands/networking/ip_-s_-d_link").read_text().splitlines():
        if not line[:1].isdigit():
            continue
        idx, name, rest = line.split(": ", 2)
        w = rest.split()
        out[name.split("@")[0]] = {"ifindex": int(idx), "mtu": int(w[w.index("mtu") + 1]),
                                   "operstate": w[w.index("state") + 1].lower(),
                                   "txqueuelen": int(w[w.index("qlen") + 1])}
    return out
