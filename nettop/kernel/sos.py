"""What a `sos report` holds besides proc/ and sys/: the settings sysfs cannot hold.

A sosreport directory (or its extracted .tar.xz) is a captured tree: `proc/`, `sys/`,
plus `sos_commands/PLUGIN/COMMAND` text outputs. nettop reads from those:

    sos_commands/kernel/sysctl_-a                 sysctls whose proc/sys file sos did not copy
                                                  (also kernel.hostname, kernel.osrelease)
    sos_commands/networking/ethtool_-c_IF         coalescing
    sos_commands/networking/ethtool_-g_IF         ring sizes
    sos_commands/networking/ethtool_-l_IF         channels
    sos_commands/networking/ethtool_-i_IF         driver (sysfs's device/driver link is not kept)
    sos_commands/networking/ip_-s_-d_link         ifindex, MTU, state, qlen of interfaces whose
                                                  sysfs folder sos kept without those files

each parsed from the ethtool CLI's text into the names the ethtool ioctl gives live
("rx-usecs", "rx-max", "combined"), with "n/a" as the 0 the ioctl returns for it.
`nettop capture` writes the same names under `commands/`, read the same way.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

SYSCTL_A = "sos_commands/kernel/sysctl_-a"
_CMD_DIRS = ("sos_commands/networking", "commands")  # sos report, nettop capture
_COALESCE = ("rx-usecs", "rx-frames", "tx-usecs", "tx-frames")
_ADAPTIVE = re.compile(r"Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)")


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


def command_file(root_path: str, opt: str, ifname: str) -> str | None:
    """Path (relative to the root) of `ethtool OPT IFNAME`'s saved output, if any."""
    for d in _CMD_DIRS:
        rel = f"{d}/ethtool_{opt}_{ifname}"
        if os.path.isfile(os.path.join(root_path, rel)):
            return rel
    return None


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


def nic_settings(root_path: str, ifname: str) -> tuple[
        dict[str, int] | None, dict[str, int] | None, dict[str, int] | None, dict[str, str]]:
    """(coalesce, rings, channels, sources) of one NIC from saved ethtool outputs;
    `sources` maps "coalesce"/"rings"/"channels" to the file each came from."""
    results: list[dict[str, int] | None] = []
    sources: dict[str, str] = {}
    for what, opt, parse in (("coalesce", "-c", parse_coalesce), ("rings", "-g", parse_rings),
                             ("channels", "-l", parse_channels)):
        rel = command_file(root_path, opt, ifname)
        value = None
        if rel is not None:
            try:
                value = parse(_read(root_path, rel))
            except OSError:
                value = None
        if value is not None and rel is not None:
            sources[what] = rel
        results.append(value)
    return results[0], results[1], results[2], sources


def nic_driver(root_path: str, ifname: str) -> tuple[str | None, str | None]:
    """(driver, the file it came from) of one NIC from its saved `ethtool -i` output:
    sos copies no device/driver link, and without it a NIC's driver went unnamed."""
    rel = command_file(root_path, "-i", ifname)
    if rel is None:
        return None, None
    try:
        text = _read(root_path, rel)
    except OSError:
        return None, None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "driver" and value.strip():
            return value.strip(), rel
    return None, None


IP_LINK = "ip_-s_-d_link"
_LINK_HEAD = re.compile(r"^(\d+): ([^:@\s]+)(?:@\S*)?: <[^>]*>(.*)$")


def ip_link_file(root_path: str) -> str | None:
    """Path (relative to the root) of the saved `ip -s -d link` output, if any."""
    for d in _CMD_DIRS:
        rel = f"{d}/{IP_LINK}"
        if os.path.isfile(os.path.join(root_path, rel)):
            return rel
    return None


@lru_cache(maxsize=8)
def ip_links(root_path: str) -> dict[str, dict[str, int | str]]:
    """Interface -> {"ifindex", "mtu", "operstate", "txqueuelen"} from the saved
    `ip -s -d link` ({} when absent): sos copies an interface's statistics/ and flags but
    not its ifindex, mtu, operstate or tx_queue_len, which were shown as 0 and "unknown"."""
    rel = ip_link_file(root_path)
    if rel is None:
        return {}
    try:
        text = _read(root_path, rel)
    except OSError:
        return {}
    out: dict[str, dict[str, int | str]] = {}
    for line in text.splitlines():
        m = _LINK_HEAD.match(line)
        if not m:
            continue
        info: dict[str, int | str] = {"ifindex": int(m.group(1))}
        words = m.group(3).split()
        for key, field in (("mtu", "mtu"), ("qlen", "txqueuelen"), ("state", "operstate")):
            if key in words[:-1]:
                value = words[words.index(key) + 1]
                if field == "operstate":
                    info[field] = value.lower()
                elif value.isascii() and value.isdigit() and len(value) <= 10:
                    info[field] = int(value)
        out.setdefault(m.group(2), info)
    return out
