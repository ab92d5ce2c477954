"""A real `sos report --batch` (Debian's sosreport; plugins networking, kernel, processor)
taken with the veth lab up, opened by nettop as a .tar.xz; every figure nettop shows is
compared with the archive's own files, parsed here independently (issue 27)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import sos_files as sf
from nettop.cli import main

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="sos report and the lab need root"),
    pytest.mark.skipif(shutil.which("sos") is None, reason="Debian's sosreport is not installed"),
]


@pytest.fixture(scope="module")
def sos_archive(tmp_path_factory):
    """(the .tar.xz, its extracted directory, the lab's host-side veth name)."""
    import lab as _lab

    reason = _lab.can_build_lab()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("sos")
    with _lab.veth_lab(queues=4) as lab:
        p = subprocess.run(["sos", "report", "--batch", "-q", "--only-plugins",
                            sf.SOS_PLUGINS, "--tmp-dir", str(tmp)],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        host_if = lab.host_if
    arc = next(tmp.glob("sosreport-*.tar.xz"))
    top = sf.extract(arc, tmp / "x")  # the test's own, plain extraction
    return arc, top, host_if


def _doc(capsys, root: str) -> dict:
    capsys.readouterr()
    assert main(["snapshot", "--json", "--root", root]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_figure_nettop_shows_for_a_sosreport_matches_the_archive(sos_archive, capsys):
    arc, top, host_if = sos_archive
    doc = _doc(capsys, str(arc))
    sysctl = sf.kv((top / "sos_commands/kernel/sysctl_-a").read_text(), " = ")
    assert doc["host"] == sysctl["kernel.hostname"] and doc["kernel"] == sysctl["kernel.osrelease"]

    # sysctls: from the proc/sys file where sos copied it, else from `sysctl -a`, and said so
    for name, value in doc["host_config"]["sysctls"].items():
        if value is None:
            continue
        rel = "proc/sys/" + name.replace(".", "/")
        src = doc["setting_sources"][f"sysctl {name}"]
        if (top / rel).is_file():
            assert src == rel and value == (top / rel).read_text().strip()
        else:
            assert src == "sos_commands/kernel/sysctl_-a"
            assert value.split() == sysctl[name].split()
    assert doc["host_config"]["default_qdisc"] == sysctl["net.core.default_qdisc"]

    # interfaces: every one sysfs or /proc/net/dev lists, counters from the archive's files
    netdev = sf.proc_net_dev(top)
    assert host_if in doc["interfaces"] and set(netdev) <= set(doc["interfaces"])
    for name, iface in doc["interfaces"].items():
        stats = top / "sys/class/net" / name / "statistics"
        for f, v in iface["counters"].items():
            if stats.is_dir():
                assert v == int((stats / f).read_text()), (name, f)
            else:
                assert v == netdev[name][sf.NETDEV_COLUMN[f]], (name, f)
        # no uptime in these plugins: rates are unknown, never 0
        assert iface["rx_bytes_per_s"] is None and iface["tx_packets_per_s"] is None

        # coalescing, rings, channels from sos_commands, and which file each came from
        cmd = top / "sos_commands/networking"
        g, c, l = (cmd / f"ethtool_-g_{name}", cmd / f"ethtool_-c_{name}", cmd / f"ethtool_-l_{name}")
        if l.is_file() and "Current hardware settings" in l.read_text():
            assert iface["channels"] == sf.channels(l.read_text()), name
            assert doc["setting_sources"][f"{name} channels"] == f"sos_commands/networking/ethtool_-l_{name}"
        if g.is_file() and "Current hardware settings" in g.read_text():
            assert iface["rings"] == sf.rings(g.read_text()), name
        if c.is_file() and "rx-usecs:" in c.read_text():
            assert iface["coalesce"] == sf.coalesce(c.read_text()), name
    # what sos's sysfs copy lacks, from `ip -s -d link` and `tc -s qdisc show`, said so
    net = top / "sos_commands/networking"
    heads = {m.group(2): m for m in re.finditer(
        r"^(\d+): ([^:@\s]+)(?:@\S+)?: <[^>]*> mtu (\d+) .*?qlen (\d+)", (net / "ip_-s_-d_link").read_text(), re.M)}
    for name, m in heads.items():
        if name in doc["interfaces"] and not (top / "sys/class/net" / name / "mtu").is_file():
            iface = doc["interfaces"][name]
            assert (iface["ifindex"], iface["mtu"], iface["txqueuelen"]) == (int(m.group(1)), int(m.group(3)), int(m.group(4)))
            assert doc["setting_sources"][f"{name} link"] == "sos_commands/networking/ip_-s_-d_link"
    roots = {m.group(2): m.group(1) for m in re.finditer(
        r"^qdisc (\S+) \S+ dev (\S+) root", (net / "tc_-s_qdisc_show").read_text(), re.M)}
    for name, kind in roots.items():
        if name in doc["interfaces"]:
            assert doc["interfaces"][name]["qdisc"]["kind"] == kind, name
            assert doc["setting_sources"][f"{name} qdisc"] == "sos_commands/networking/tc_-s_qdisc_show"
    assert doc["host_config"]["irqbalance_running"] is None  # no process plugin: not known
    assert doc["interfaces"][host_if]["channels"] is not None  # veth: 4 queues
    assert doc["interfaces"][host_if]["channels"]["rx"] == 4 or \
        doc["interfaces"][host_if]["channels"]["combined"] == 4 or \
        doc["interfaces"][host_if]["channels"]["tx"] == 4

    # per CPU: softnet and NET_RX/NET_TX totals against the archive's proc files
    softnet = sf.softnet(top)
    sirq = sf.softirqs(top)
    by_cpu = {c["cpu"]: c for c in doc["cpus"]}
    for i, row in enumerate(softnet):
        cpu = row[12] if len(row) >= 13 else i
        t = by_cpu[cpu]["totals"]
        assert (t["softnet_processed"], t["softnet_dropped"], t["time_squeeze"]) == (row[0], row[1], row[2])
        assert (t["net_rx"], t["net_tx"]) == (sirq["NET_RX"][cpu], sirq["NET_TX"][cpu])
        assert by_cpu[cpu]["net_rx_per_s"] is None

    # what the archive lacks is said, once each
    probs = doc["problems"]
    assert sum("/proc/uptime" in p for p in probs) == 1
    assert sum("/proc/interrupts" in p for p in probs) == 1
    assert doc["rates_basis"] == "none"


def test_the_extracted_sos_directory_gives_the_same_document(sos_archive, capsys):
    arc, top, _ = sos_archive
    a, b = _doc(capsys, str(arc)), _doc(capsys, str(top))
    for d in (a, b):
        d.pop("nettop")
        d.pop("time")  # when nettop read it
    assert a == b
