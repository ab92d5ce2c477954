"""Rates from captured trees: one capture (since-boot averages) or two (the interval
between them), for `nettop snapshot` and `nettop doctor` with `--root`.

A captured tree is read once; reading it twice would give the same counters and rates of
0. With one capture the earlier sample is the host at boot (model/since_boot.py); with
two, the interval is the difference of the captures' own /proc/uptime, never the time
nettop took to read them. Counter resets between two captures (a driver reloaded, an
interface re-created) are detected by the rate functions as for live samples; a reboot
between them (uptime going backwards) or captures of two hosts are refused in one line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from nettop.kernel.sysroot import SysRoot
from nettop.model.since_boot import boot_snapshot
from nettop.model.snapshot import Snapshot

SINCE_BOOT = "since_boot"
BETWEEN = "between_captures"
NONE = "none"


class CaptureError(ValueError):
    """Captures that cannot give rates together (one line, for the user)."""


@dataclass(frozen=True, slots=True)
class CapturePair:
    """The two snapshots rates are computed between, and what that interval is."""

    prev: Snapshot
    cur: Snapshot
    basis: str  # SINCE_BOOT, BETWEEN, or NONE (no uptime: no rate can be given)
    note: str  # one line saying what the rates are, for reports and the doctor


def read_capture(root: SysRoot, ifaces: Iterable[str] | None = None) -> Snapshot:
    """One capture, its wall-clock time the capture's own (capture.json, else its proc
    files' times) when known, so JSON, screens and recordings never show when nettop read it."""
    from nettop.capture.archive import capture_time
    from nettop.collectors.host import HostReader

    with HostReader(root, ifaces) as reader:
        snap = reader.read()
    when = capture_time(root.path)
    return snap if when is None else dataclasses.replace(snap, t_wall=when)


def expand(roots: list[SysRoot]) -> list[SysRoot]:
    """The trees to read: a two-capture archive given once stands for both its captures."""
    from nettop.capture.archive import second_capture

    if len(roots) == 1:
        second = second_capture(roots[0].path)
        if second is not None:
            return [roots[0], SysRoot(second)]
    return list(roots)


def pair(snaps: list[Snapshot]) -> CapturePair:
    """Rates' endpoints for one or two captures of one host."""
    if len(snaps) == 1:
        cur = snaps[0]
        boot = boot_snapshot(cur)
        if boot is None:
            return CapturePair(dataclasses.replace(cur, t_mono=cur.t_mono - 1.0), cur, NONE,
                               "one capture, and no uptime in it: totals only, no rate or "
                               "average can be given")
        return CapturePair(boot, cur, SINCE_BOOT,
                           f"one capture: figures are since-boot averages over "
                           f"{_human(cur.uptime_s or 0.0)} of uptime (totals ÷ uptime), not "
                           "current rates")
    if len(snaps) != 2:
        raise CaptureError(f"give one or two captures (--root), not {len(snaps)}")
    a, b = snaps
    if a.host != b.host:
        raise CaptureError(f"the captures are of two hosts ({a.host!r}, {b.host!r}); rates "
                           "need two captures of one host")
    if a.uptime_s is None or b.uptime_s is None:
        raise CaptureError("a capture lacks proc/uptime, so the time between the captures "
                           "is not known; no rate can be given")
    elapsed = b.uptime_s - a.uptime_s
    if elapsed < 0:
        raise CaptureError(f"the second capture's uptime ({b.uptime_s:g} s) is below the "
                           f"first's ({a.uptime_s:g} s): the host rebooted between them, or "
                           "they are given in the wrong order")
    if elapsed < 0.01:
        raise CaptureError("the two captures were taken at the same uptime (the same "
                           "capture twice?); no rate can be given")
    prev = dataclasses.replace(a, t_mono=b.t_mono - elapsed, t_wall=b.t_wall - elapsed)
    return CapturePair(prev, b, BETWEEN,
                       f"two captures {elapsed:.2f} s apart (by their /proc/uptime): rates "
                       "over that interval")


def _human(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds:.0f} s"


def snapshot_document(roots: list[SysRoot], ifaces: list[str] | None) -> dict[str, Any]:
    """The `nettop snapshot --json` document of one or two captures (CaptureError when
    they cannot give rates together)."""
    from nettop.model.rates import compute_rates
    from nettop.output.snapshot_json import build_document

    trees = expand(roots)
    p = pair([read_capture(r, ifaces) for r in trees])
    doc = build_document(p.prev, p.cur, compute_rates(p.prev, p.cur), None)
    doc["rates_basis"] = p.basis
    doc["setting_sources"] = setting_sources(trees[-1], doc)
    if p.basis == NONE:
        doc["interval_s"] = None
        _unknown_rates(doc)
    if p.basis == BETWEEN and p.prev.problems:
        # the first capture's own problems (the document lists the second's)
        doc["problems"][:0] = [f"first capture: {m.message}" for m in p.prev.problems]
    doc["problems"].insert(0, p.note)
    return doc


def _unknown_rates(node: Any) -> None:
    """Every rate and share in the document to null: there is no interval to divide by."""
    if isinstance(node, dict):
        for k, v in node.items():
            # an IRQ's rate is plain "per_s": it was left at 0.0 when the rest went null
            if isinstance(k, str) and (k.endswith("per_s") or k.endswith("_pct")) and not isinstance(v, (dict, list)):
                node[k] = None
            elif k == "per_cpu_per_s":
                node[k] = {}
            else:
                _unknown_rates(v)
    elif isinstance(node, list):
        for v in node:
            _unknown_rates(v)


def setting_sources(root: SysRoot, doc: dict[str, Any]) -> dict[str, str]:
    """Where each setting of a captured host came from: "sysctl net.core.x", "eth0
    coalesce", "eth0 features", "eth0 qdisc", "eth0 link" (MTU, txqueuelen, state when
    sysfs lacks them), "eth0 queue counters", "uptime" -> the file under the root (a proc/sys
    file, or a sosreport's `sysctl -a` / ethtool / tc / ip output)."""
    import os

    from nettop.kernel import sos

    out: dict[str, str] = {}
    if not os.path.isfile(root.join("proc/uptime")):
        rel_up = sos.uptime(root.path)[1]
        if rel_up is not None:
            out["uptime"] = rel_up  # `uptime`'s text, to the minute
    sysctl_names = list(doc["host_config"]["sysctls"]) + ["net.core.default_qdisc",
                                                          "net.core.rps_sock_flow_entries"]
    for name in sysctl_names:
        rel = "proc/sys/" + name.replace(".", "/")
        if os.path.isfile(root.join(rel)):
            out[f"sysctl {name}"] = rel
        elif sos.sysctl_for(root.path, rel) is not None:
            out[f"sysctl {name}"] = sos.SYSCTL_A
    links, ip_src = sos.ip_links(root.path)
    tc, tc_src = sos.tc_qdiscs(root.path)
    for ifname, iface in doc["interfaces"].items():
        if ip_src is not None and ifname in links and not os.path.isfile(
                root.join(f"sys/class/net/{ifname}/mtu")):
            out[f"{ifname} link"] = ip_src  # ifindex, MTU, txqueuelen, state, kind, queues
        if tc_src is not None and iface.get("qdisc") and any(q.ifname == ifname for q in tc):
            out[f"{ifname} qdisc"] = tc_src
        for what, src in sos.nic_settings(root.path, ifname)[3].items():
            out[f"{ifname} {what}"] = src
        feats_src = sos.features(root.path, ifname)[1]
        if feats_src is not None:
            out[f"{ifname} features"] = feats_src
        stats_src = sos.ethtool_stats(root.path, ifname)[1]
        if stats_src is not None and iface.get("queue_stats_source") == "ethtool-stats":
            out[f"{ifname} queue counters"] = stats_src
        driver, src_i = sos.nic_driver(root.path, ifname)
        if src_i is not None and driver == doc["interfaces"][ifname]["driver"] and \
                not os.path.exists(root.join(f"sys/class/net/{ifname}/device/driver")):
            out[f"{ifname} driver"] = src_i
    return out
