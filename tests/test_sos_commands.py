"""The command outputs a sosreport (or `nettop capture`) keeps as text: `ethtool -k`,
`ethtool -S`, `tc -s qdisc show`, `ip -s -d link`, parsed from real outputs of iproute2 /
ethtool 6.1 (tests/data/sos_commands/) and from older versions' layouts, fed into a
captured tree and read back with the source of each setting named (issue 27)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.cli import main
from nettop.kernel.sos_text import (
    parse_ethtool_stats, parse_features, parse_ip_link, parse_tc_qdiscs,
)

DATA = Path(__file__).parent / "data" / "sos_commands"
FILES = sorted(p for p in DATA.iterdir() if p.name != "README.md")


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_tc_qdiscs_of_an_mq_veth_match_the_text_line_by_line():
    text = _read("tc_-s_qdisc_show.mq-pfifo_fast")
    got = parse_tc_qdiscs(text)
    heads = [line.split() for line in text.splitlines() if line.startswith("qdisc ")]
    sent = [re.findall(r"\d+", line)[:4] for line in text.splitlines() if "Sent" in line]
    assert len(got) == len(heads) == len(sent)
    for q, h, s in zip(got, heads, sent):
        assert (q.kind, q.handle, q.ifname) == (h[1], h[2], h[4])
        assert q.parent == (h[6] if h[5] == "parent" else h[5])
        assert [q.bytes, q.packets, q.drops, q.overlimits] == [int(x) for x in s]
    v0 = [q for q in got if q.ifname == "v0"]
    assert v0[0].kind == "mq" and sorted(q.parent for q in v0[1:]) == [f"8001:{i}" for i in range(1, 5)]


def test_tc_of_old_iproute2_with_requeues_on_the_sent_line_and_a_rate_line():
    # the layout iproute2 3.x printed (RHEL 7): rate line holding the backlog
    text = ("qdisc mq 0: dev eth0 root \n"
            " Sent 123456 bytes 789 pkt (dropped 3, overlimits 0 requeues 7) \n"
            " rate 0bit 0pps backlog 12Kb 4p requeues 7 \n"
            "qdisc ingress ffff: dev eth0 parent ffff:fff1 ---------------- \n"
            " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n")
    mq, ingress = parse_tc_qdiscs(text)
    assert (mq.bytes, mq.packets, mq.drops, mq.requeues) == (123456, 789, 3, 7)
    assert (mq.backlog_bytes, mq.backlog_packets) == (12000, 4)
    assert (ingress.kind, ingress.parent, ingress.backlog_bytes) == ("ingress", "ffff:fff1", None)


def _ip_blocks(text: str) -> dict[str, list[str]]:
    """The test's own split of `ip -s -d link` into one block per interface."""
    blocks: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if line[:1].isdigit():
            name = line.split(":")[1].strip().split("@")[0]
            blocks[name] = [line]
        elif name:
            blocks[name].append(line)
    return blocks


def test_ip_link_gives_mtu_qlen_state_queues_and_counters_as_printed():
    for fixture in ("ip_-s_-d_link.sos-virtio", "ip_-s_-d_link.veth-bridge", "ip_-s_-s_-d_link.veth-bridge"):
        text = _read(fixture)
        got = parse_ip_link(text)
        blocks = _ip_blocks(text)
        assert set(got) == set(blocks), fixture
        for name, lines in blocks.items():
            head = lines[0].split()
            link = got[name]
            assert link.ifindex == int(head[0].rstrip(":"))
            assert link.mtu == int(head[head.index("mtu") + 1])
            assert link.txqueuelen == int(head[head.index("qlen") + 1])
            assert link.state == head[head.index("state") + 1]
            rx = lines[[i for i, line in enumerate(lines) if line.split()[:1] == ["RX:"]][0] + 1].split()
            tx = lines[[i for i, line in enumerate(lines) if line.split()[:1] == ["TX:"]][0] + 1].split()
            assert [link.counters[f"rx_{k}"] for k in ("bytes", "packets", "errors", "dropped")] == [int(x) for x in rx[:4]]
            assert [link.counters[f"tx_{k}"] for k in ("bytes", "packets", "errors", "dropped")] == [int(x) for x in tx[:4]]
            body = " ".join(lines[1:]).split()
            assert link.num_tx_queues == int(body[body.index("numtxqueues") + 1])
    veth = parse_ip_link(_read("ip_-s_-d_link.veth-bridge"))
    assert (veth["v0"].kind, veth["v1"].kind, veth["br0"].kind) == ("veth", "veth", "bridge")
    assert veth["v1"].master == "br0" and veth["v0"].num_rx_queues == 4
    assert parse_ip_link(_read("ip_-s_-d_link.sos-virtio"))["eth0"].kind is None  # physical


def test_ip_link_of_old_iproute2_with_other_counter_columns():
    # iproute2 4.x: "overrun" column, kind after the link/ether line's words
    text = ("2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP mode DEFAULT qlen 1000\n"
            "    link/ether 02:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff promiscuity 0 numtxqueues 8 numrxqueues 8\n"
            "    RX: bytes  packets  errors  dropped overrun mcast   \n"
            "    9876543    12345    1       2       0       5      \n"
            "    TX: bytes  packets  errors  dropped carrier collsns \n"
            "    1234       56       0       3       0       0      \n")
    eth0 = parse_ip_link(text)["eth0"]
    assert (eth0.mtu, eth0.txqueuelen, eth0.num_tx_queues, eth0.kind) == (9000, 1000, 8, None)
    assert dict(eth0.counters) == {"rx_bytes": 9876543, "rx_packets": 12345, "rx_errors": 1, "rx_dropped": 2,
                                   "tx_bytes": 1234, "tx_packets": 56, "tx_errors": 0, "tx_dropped": 3}


def test_features_are_the_on_off_word_of_their_long_names():
    for fixture in ("ethtool_-k.virtio_net", "ethtool_-k.veth"):
        text = _read(fixture)
        words = {k.strip(): v.split()[0] for k, _, v in (line.partition(":") for line in text.splitlines()) if v.strip()}
        assert parse_features(text) == {
            "gro": words["generic-receive-offload"] == "on",
            "gso": words["generic-segmentation-offload"] == "on",
            "tso": words["tcp-segmentation-offload"] == "on",
        }


def test_ethtool_stats_keep_every_name_and_value_in_order():
    for fixture in ("ethtool_-S.virtio_net", "ethtool_-S.veth"):
        text = _read(fixture)
        lines = [line.strip() for line in text.splitlines()[1:] if line.strip()]
        assert parse_ethtool_stats(text) == [(k, int(v)) for k, _, v in (line.rpartition(": ") for line in lines)]
    bnxt = "NIC statistics:\n     [0]: rx_ucast_packets: 17\n     [0]: rx_ucast_bytes: 1700\n"
    assert parse_ethtool_stats(bnxt) == [("[0]: rx_ucast_packets", 17), ("[0]: rx_ucast_bytes", 1700)]


_LINES = st.sampled_from([line for p in FILES for line in p.read_text().splitlines()] or [""])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=60)), max_size=30), st.integers(0, 80))
def test_any_damaged_output_parses_without_raising(lines, cut):
    text = "\n".join(line[:cut] if i % 3 == 0 else line for i, line in enumerate(lines))
    for q in parse_tc_qdiscs(text):
        assert all(v is None or v >= 0 for v in (q.bytes, q.packets, q.drops, q.backlog_bytes))
    for link in parse_ip_link(text).values():
        assert all(0 <= v < 1 << 64 for v in link.counters.values())
    parse_features(text)
    assert all(v >= 0 for _, v in parse_ethtool_stats(text))


def _sos_tree(tmp_path: Path) -> Path:
    """A sosreport-shaped tree: sysfs as sos copies it (statistics/ only), the saved outputs."""
    root = tmp_path / "sosreport-host"
    stats = root / "sys/class/net/eth0/statistics"
    stats.mkdir(parents=True)
    for f in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors",
              "rx_dropped", "tx_dropped"):
        (stats / f).write_text("5\n")
    net = root / "sos_commands/networking"
    net.mkdir(parents=True)
    text = _read("ip_-s_-d_link.sos-virtio")
    (net / "ip_-s_-d_link").write_text(text)
    shutil.copy(DATA / "tc_-s_qdisc_show.sos-pfifo_fast", net / "tc_-s_qdisc_show")
    shutil.copy(DATA / "ethtool_-k.virtio_net", net / "ethtool_-k_eth0")
    ixgbe = (Path(__file__).parent / "data/ethtool/ixgbe.txt").read_text().split()
    (net / "ethtool_-S_eth0").write_text(
        "NIC statistics:\n" + "".join(f"     {n}: {10 * i}\n" for i, n in enumerate(ixgbe)))
    (root / "proc").mkdir()
    (root / "proc/uptime").write_text("1000.00 1900.00\n")
    return root


def test_a_sosreport_tree_shows_link_qdisc_features_and_queue_counters_with_their_sources(tmp_path, capsys):
    root = _sos_tree(tmp_path)
    assert main(["snapshot", "--json", "--root", str(root)]) == 0
    doc = json.loads(capsys.readouterr().out)
    eth0 = doc["interfaces"]["eth0"]
    assert (eth0["ifindex"], eth0["mtu"], eth0["txqueuelen"], eth0["operstate"]) == (4, 1400, 1000, "up")
    assert eth0["qdisc"]["kind"] == "pfifo_fast"
    assert eth0["queue_stats_source"] == "ethtool-stats"
    names = (Path(__file__).parent / "data/ethtool/ixgbe.txt").read_text().split()
    want = 10 * names.index("rx_queue_1_packets")
    assert [q for q in eth0["queue_counters"] if q["kind"] == "rx" and q["index"] == 1][0]["packets"] == want
    src = doc["setting_sources"]
    assert src["eth0 link"] == "sos_commands/networking/ip_-s_-d_link"
    assert src["eth0 qdisc"] == "sos_commands/networking/tc_-s_qdisc_show"
    assert src["eth0 features"] == "sos_commands/networking/ethtool_-k_eth0"
    assert src["eth0 queue counters"] == "sos_commands/networking/ethtool_-S_eth0"
    # lo is in ip's output only: kept, with ip's counters
    assert doc["interfaces"]["lo"]["mtu"] == 65536


def _irqbalance(capsys, root: Path) -> tuple[object, list[str]]:
    capsys.readouterr()
    assert main(["snapshot", "--json", "--root", str(root)]) == 0
    doc = json.loads(capsys.readouterr().out)
    return doc["host_config"]["irqbalance_running"], [p for p in doc["problems"] if "irqbalance" in p]


def test_irqbalance_of_a_sosreport_is_unknown_without_ps_and_read_from_ps_with_it(tmp_path, capsys):
    root = _sos_tree(tmp_path)
    running, problems = _irqbalance(capsys, root)
    assert running is None and len(problems) == 1 and "process list" in problems[0]
    ps = root / "sos_commands/process/ps_auxwww"
    ps.parent.mkdir(parents=True)
    head = "USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND\n"
    ps.write_text(head + "root         1  0.0  0.1 167744 11544 ?        Ss   Nov24   0:03 /sbin/init\n"
                  "root       612  0.0  0.0  81828  3840 ?        Ss   Nov24   0:00 grep irqbalance\n")
    assert _irqbalance(capsys, root) == (False, [])
    ps.write_text(ps.read_text() + "root       733  0.0  0.0  81828  3840 ?        Ssl  Nov24   1:12 "
                  "/usr/sbin/irqbalance --foreground\n")
    assert _irqbalance(capsys, root) == (True, [])


def test_a_tick_of_a_four_nic_tree_looks_no_saved_output_up_again(tmp_path, monkeypatch):
    """A captured tree's saved command outputs (or their absence) are looked up once: a
    tick asks for `ethtool -S` and `-k` of each interface besides `ip link` and `tc`, ten
    files with four NICs, and a cache smaller than that missed every one of them on every
    tick (two stats each)."""
    from nettop.collectors.host import HostReader
    from nettop.kernel import sos
    from nettop.kernel.sysroot import SysRoot
    from treegen import generate_tree

    tree = generate_tree(tmp_path / "t", cpus=8, irqs=80, queues=4, nics=4)
    lookups: list[str] = []
    real = sos.saved_file
    monkeypatch.setattr(sos, "saved_file", lambda root, name: lookups.append(name) or real(root, name))
    with HostReader(SysRoot(str(tree))) as r:
        r.read()
        first = len(lookups)
        r.read()
    assert first >= 10 and len(lookups) == first, lookups[first:]
