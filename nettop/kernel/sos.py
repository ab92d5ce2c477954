"""What a `sos report` holds besides proc/ and sys/: the settings sysfs cannot hold.

A sosreport directory (or its extracted .tar.xz) is a captured tree: `proc/`, `sys/`,
plus `sos_commands/PLUGIN/COMMAND` text outputs. nettop reads from those:

    sos_commands/kernel/sysctl_-a                 sysctls whose proc/sys file sos did not copy
                                                  (also kernel.hostname, kernel.osrelease)
    sos_commands/networking/ethtool_-c_IF         coalescing
    sos_commands/networking/ethtool_-g_IF         ring sizes
    sos_commands/networking/ethtool_-l_IF         channels
    sos_commands/networking/ethtool_-k_IF         offloads (gro, gso, tso)
    sos_commands/networking/ethtool_-S_IF         per-queue packets/bytes where the driver names them
    sos_commands/networking/tc_-s_qdisc_show      qdiscs and their counters
    sos_commands/networking/ip_-s_-d_link         ifindex, MTU, txqueuelen, state, kind, queue
                                                  counts (sos copies sysfs without them)
    sos_commands/networking/ethtool_-i_IF         driver (sysfs's device/driver link is not kept)

each parsed from the ethtool CLI's text into the names the ethtool ioctl gives live
("rx-usecs", "rx-max", "combined"), with "n/a" as the 0 the ioctl returns for it.
`nettop capture` writes the same names under `commands/`, read the same way.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from nettop.kernel import sos_text

SYSCTL_A = "sos_commands/kernel/sysctl_-a"
_CMD_DIRS = ("sos_commands/networking", "commands")  # sos report, nettop capture
_COALESCE = ("rx-usecs", "rx-frames", "tx-usecs", "tx-frames")
_ADAPTIVE = re.compile(r"Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)")


# A captured tree's saved outputs are as they were captured: each is looked up and
# parsed once per tree (a replayed capture asks for them every tick), as `sysctls` is.
@lru_cache(maxsize=8)
def is_sos(root_path: str) -> bool:
    return os.path.isdir(os.path.join(root_path, "sos_commands"))


@lru_cache(maxsize=8)
def sysctls(root_path: str) -> dict[str, str]:
    """Dotted sysctl name -> value as `sysctl -a` printed it ({} when absent)."""
    try:
        with open(os.path.join(root_path, SYSCTL_A), encoding="latin-1") as f:
            text = f.read()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(" = ")
        if sep and name and " " not in name:
            out.setdefault(name, value.strip())
    return out


def sysctl_for(root_path: str, rel: str) -> str | None:
    """The value `sysctl -a` gave for a proc/sys path ("proc/sys/net/core/x" -> "net.core.x")."""
    rel = rel.lstrip("/")
    if not rel.startswith("proc/sys/"):
        return None
    return sysctls(root_path).get(rel[len("proc/sys/"):].replace("/", "."))


def _read(root_path: str, rel: str) -> str:
    with open(os.path.join(root_path, rel), encoding="latin-1") as f:
        return f.read()


def _num(text: str) -> int | None:
    text = text.strip()
    if text in ("n/a", "off"):
        return 0
    if text == "on":
        return 1
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else None


def parse_coalesce(text: str) -> dict[str, int] | None:
    """`ethtool -c` text -> the parameters nettop shows; None when the driver had none."""
    out: dict[str, int] = {}
    m = _ADAPTIVE.search(text)
    if m:
        for key, v in (("adaptive-rx", m.group(1)), ("adaptive-tx", m.group(2))):
            n = _num(v)
            if n is not None:
                out[key] = n
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in _COALESCE:
            n = _num(value)
            if n is not None:
                out[key.strip()] = n
    return out if len(out) == 2 + len(_COALESCE) else None


def _two_blocks(text: str) -> tuple[dict[str, int], dict[str, int]] | None:
    """(maximums, current) of `ethtool -g` / `-l` text, keyed by lower-case field."""
    maxima: dict[str, int] = {}
    current: dict[str, int] = {}
    block: dict[str, int] | None = None
    for line in text.splitlines():
        if line.startswith("Pre-set maximums"):
            block = maxima
            continue
        if line.startswith("Current hardware settings"):
            block = current
            continue
        key, sep, value = line.partition(":")
        if block is None or not sep:
            continue
        n = _num(value)
        if n is not None:
            block[key.strip().lower().replace(" ", "-")] = n
    return (maxima, current) if maxima or current else None


def parse_rings(text: str) -> dict[str, int] | None:
    got = _two_blocks(text)
    if got is None:
        return None
    maxima, current = got
    out = {f"{k}-max": v for k, v in maxima.items() if k in ("rx", "tx")}
    out.update({k: v for k, v in current.items() if k in ("rx", "tx")})
    return out or None


def parse_channels(text: str) -> dict[str, int] | None:
    got = _two_blocks(text)
    if got is None:
        return None
    maxima, current = got
    keys = ("rx", "tx", "other", "combined")
    out = {f"{k}-max": v for k, v in maxima.items() if k in keys}
    out.update({k: v for k, v in current.items() if k in keys})
    return out or None


@lru_cache(maxsize=1024)  # parsed once per tree (its saved text is as captured): shared, do not change it
def nic_settings(root_path: str, ifname: str) -> tuple[
        dict[str, int] | None, dict[str, int] | None, dict[str, int] | None, dict[str, str]]:
    """(coalesce, rings, channels, sources) of one NIC from saved ethtool outputs;
    `sources` maps "coalesce"/"rings"/"channels" to the file each came from."""
    results: list[dict[str, int] | None] = []
    sources: dict[str, str] = {}
    for what, opt, parse in (("coalesce", "-c", parse_coalesce), ("rings", "-g", parse_rings),
                             ("channels", "-l", parse_channels)):
        got = _saved_text(root_path, f"ethtool_{opt}_{ifname}")
        value = parse(got[1]) if got is not None else None
        if value is not None and got is not None:
            sources[what] = got[0]
        results.append(value)
    return results[0], results[1], results[2], sources


@lru_cache(maxsize=1024)  # parsed once per tree (its saved text is as captured): shared, do not change it
def nic_driver(root_path: str, ifname: str) -> tuple[str | None, str | None]:
    """(driver, the file it came from) of one NIC from its saved `ethtool -i` output:
    sos copies no device/driver link, and without it a NIC's driver went unnamed."""
    got = _saved_text(root_path, f"ethtool_-i_{ifname}")
    if got is None:
        return None, None
    rel, text = got
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "driver" and value.strip():
            return value.strip(), rel
    return None, None


IP_LINK = "ip_-s_-d_link"
TC_QDISC = "tc_-s_qdisc_show"


def saved_file(root_path: str, name: str) -> str | None:
    """Path (relative to the root) of a saved command output named as sos names it
    ("ip_-s_-d_link", "ethtool_-k_eth0"), under sos_commands/networking or commands/."""
    for d in _CMD_DIRS:
        rel = f"{d}/{name}"
        if os.path.isfile(os.path.join(root_path, rel)):
            return rel
    return None


# a tick asks for six files per interface (`ethtool -S`, `-k`, `-c`, `-g`, `-l`, `-i`) and
# two more: sized for hundreds of interfaces, or each tick would miss and look each one up
# again (most of them absent: an entry is small)
@lru_cache(maxsize=4096)
def _saved_text(root_path: str, name: str) -> tuple[str, str] | None:
    rel = saved_file(root_path, name)
    if rel is None:
        return None
    try:
        return rel, _read(root_path, rel)
    except OSError:
        return None


@lru_cache(maxsize=8)  # parsed once per tree (its saved text is as captured): shared, do not change it
def ip_links(root_path: str) -> tuple[dict[str, sos_text.IpLink], str | None]:
    """`ip -s -d link`'s interfaces, and the file they came from (None: no such file)."""
    got = _saved_text(root_path, IP_LINK)
    return (sos_text.parse_ip_link(got[1]), got[0]) if got else ({}, None)


@lru_cache(maxsize=8)  # parsed once per tree (its saved text is as captured): shared, do not change it
def tc_qdiscs(root_path: str) -> tuple[list[sos_text.TcQdisc], str | None]:
    """`tc -s qdisc show`'s qdiscs, and the file they came from (None: no such file)."""
    got = _saved_text(root_path, TC_QDISC)
    return (sos_text.parse_tc_qdiscs(got[1]), got[0]) if got else ([], None)


@lru_cache(maxsize=1024)  # parsed once per tree (its saved text is as captured): shared, do not change it
def features(root_path: str, ifname: str) -> tuple[dict[str, bool] | None, str | None]:
    """`ethtool -k IF`'s gro/gso/tso, and the file (None, None: not saved or unreadable)."""
    got = _saved_text(root_path, f"ethtool_-k_{ifname}")
    if got is None:
        return None, None
    feats = sos_text.parse_features(got[1])
    return (feats, got[0]) if feats else (None, None)


@lru_cache(maxsize=512)  # parsed once per tree (its saved text is as captured): shared, do not change it
def ethtool_stats(root_path: str, ifname: str) -> tuple[list[tuple[str, int]], str | None]:
    """`ethtool -S IF`'s (name, value) pairs, and the file they came from."""
    got = _saved_text(root_path, f"ethtool_-S_{ifname}")
    return (sos_text.parse_ethtool_stats(got[1]), got[0]) if got else ([], None)


UPTIME_FILES = ("sos_commands/host/uptime", "sos_commands/general/uptime")


def uptime(root_path: str) -> tuple[float | None, str | None]:
    """Seconds since boot (to the minute) from the `uptime` text sos's host plugin keeps,
    and the file: no sos plugin copies /proc/uptime. (None, None) when neither is there
    or says a time nettop can read."""
    for rel in UPTIME_FILES:
        try:
            text = _read(root_path, rel)
        except OSError:
            continue
        value = sos_text.parse_uptime(text[:4096])
        if value is not None:
            return value, rel
    return None, None


PS_FILES = ("sos_commands/process/ps_auxwww", "sos_commands/process/ps_auxww",
            "sos_commands/process/ps_aux", "ps")


def irqbalance_from_ps(root_path: str) -> tuple[bool | None, str | None]:
    """Whether irqbalance ran, from the `ps auxwww` sos's process plugin keeps, and the
    file read; (None, None) when the report has no process list (sos copies no
    /proc/PID), so it cannot be known."""
    for rel in PS_FILES:
        try:
            text = _read(root_path, rel)
        except OSError:
            continue
        return any(_argv0_is_irqbalance(line) for line in text.splitlines()[1:]), rel
    return None, None


def _argv0_is_irqbalance(line: str) -> bool:
    cols = line.split(None, 10)  # USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND
    if len(cols) < 11 or not cols[10].split():
        return False
    return os.path.basename(cols[10].split()[0]) == "irqbalance"
