"""The real-driver guest's sosreport, trimmed to the files nettop reads (tests/data/sos-guest:
virtio-net with 4 queue pairs and e1000e, taken under iperf3 by tests/vm_realdrv/test_sos_guest.py),
opened on this host: every figure nettop shows for it equals tests/sos_files.py's reading.

The files are sos's own, unedited except that sysctl_-a keeps only the kernel.* names and
the net.core and tcp_[rw]mem lines nettop reads (tests/data/sos-guest/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import sos_files as sf
from nettop.cli import main

TREE = Path(__file__).parent / "data" / "sos-guest"
NICS = {"virtio_net": "eth0", "e1000e": "eth1"}


def doc(capsys) -> dict:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    assert main(["snapshot", "--json", "--root", str(TREE)]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_guests_nics_name_their_drivers_from_ethtool_i_and_say_so(capsys):
    d = doc(capsys)
    cmd = TREE / "sos_commands/networking"
    for driver, name in NICS.items():
        assert sf.kv((cmd / f"ethtool_-i_{name}").read_text(), ":")["driver"] == driver
        assert d["interfaces"][name]["driver"] == driver
        assert d["setting_sources"][f"{name} driver"] == f"sos_commands/networking/ethtool_-i_{name}"


def test_virtio_and_e1000e_settings_come_from_their_ethtool_outputs(capsys):
    d = doc(capsys)
    cmd = TREE / "sos_commands/networking"
    for name in NICS.values():
        for what, opt, parse in (("coalesce", "-c", sf.coalesce), ("rings", "-g", sf.rings),
                                 ("channels", "-l", sf.channels)):
            text = (cmd / f"ethtool_{opt}_{name}").read_text()
            if "Current hardware settings" in text or "rx-usecs:" in text:
                assert d["interfaces"][name][what] == parse(text), (name, what)
                assert d["setting_sources"][f"{name} {what}"] == f"sos_commands/networking/ethtool_{opt}_{name}"
            else:
                assert d["interfaces"][name][what] is None and f"{name} {what}" not in d["setting_sources"]
    assert d["interfaces"]["eth0"]["channels"]["combined"] == 4


def test_cpus_are_not_gone_and_irq_rates_are_null_without_uptime(capsys):
    d = doc(capsys)
    softnet, table = sf.softnet(TREE), sf.interrupts(TREE)
    assert [c["status"] for c in d["cpus"]] == ["ok"] * len(softnet)
    for c, row in zip(d["cpus"], softnet):
        assert c["totals"]["softnet_processed"] == row[0] and c["net_rx_per_s"] is None
    assert d["irqs"]
    for irq, got in d["irqs"].items():
        assert got["count"] == sum(table[irq][1]) and got["per_s"] is None and got["per_cpu_per_s"] == {}


def test_ifindex_mtu_state_and_qlen_come_from_ip_link_not_zeros(capsys):
    d = doc(capsys)
    links = sf.ip_links(TREE)
    assert set(links) == set(d["interfaces"]) == {"lo", "eth0", "eth1"}
    for name, want in links.items():
        iface = d["interfaces"][name]
        assert {k: iface[k] for k in want} == want, name
        assert d["setting_sources"][f"{name} link"] == "sos_commands/networking/ip_-s_-d_link"
    assert d["interfaces"]["eth0"]["mtu"] == 1500 and d["interfaces"]["eth1"]["operstate"] == "up"
