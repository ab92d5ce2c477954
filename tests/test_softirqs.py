"""/proc/softirqs: NET_RX/NET_TX per CPU id, from real captures and from this kernel."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from nettop.collectors.cpus import read_online_cpus, read_possible_cpus
from nettop.collectors.softirqs import parse_softirqs, read_softirqs
from nettop.model.snapshot import SoftirqCounts
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data" / "softirqs"

# NET_RX and NET_TX rows of every capture, per header column, read off the files by eye
# (and awk). The netutils-linux ones are real servers; see netutils-linux/NOTICE.
KNOWN = {
    "netutils-linux/dualcore/softirqs1": ([183741596, 182082160, 0, 0], [98717, 98515, 0, 0]),
    "netutils-linux/dualcore/softirqs2": ([183741939, 182082575, 0, 0], [98718, 98515, 0, 0]),
    "netutils-linux/dualcore/softirqs3": ([183742219, 182082903, 0, 0], [98718, 98515, 0, 0]),
    "netutils-linux/dualcore/softirqs4": ([183742495, 182083181, 0, 0], [98718, 98515, 0, 0]),
    "netutils-linux/dualcore/softirqs5": ([183742853, 182083533, 0, 0], [98719, 98515, 0, 0]),
    "netutils-linux/i7/softirqs1": (
        [1180153410, 1833061539, 1361075413, 1155074300, 3497390485, 1428609067, 958921598,
         894237858],
        [20940277, 4040, 2917, 1538, 16915, 338057, 1696, 1191]),
    "netutils-linux/i7/softirqs2": (
        [1180153489, 1833080731, 1361075474, 1155074300, 3497390485, 1428628213, 958921624,
         894237858],
        [20940277, 4040, 2917, 1538, 16915, 338057, 1696, 1191]),
    "netutils-linux/i7/softirqs3": (
        [1180153702, 1833094571, 1361075538, 1155074301, 3497390493, 1428642052, 958922329,
         894237873],
        [20940277, 4040, 2917, 1538, 16915, 338057, 1696, 1191]),
    "netutils-linux/i7/softirqs4": (
        [1180155200, 1833104983, 1361075983, 1155074304, 3497390499, 1428651369, 958922340,
         894237875],
        [20940277, 4040, 2917, 1538, 16915, 338057, 1696, 1191]),
    "netutils-linux/i7/softirqs5": (
        [1180155737, 1833119266, 1361075983, 1155074321, 3497390508, 1428665657, 958922351,
         894237887],
        [20940277, 4040, 2917, 1538, 16915, 338058, 1696, 1191]),
    "netutils-linux/strange-cpu/softirqs": (
        [367647286, 367636094, 367657662, 367641492, 367659507, 367278260, 367644730, 367661451],
        [256, 3218226, 390, 627, 5085186, 868, 232, 271]),
    "vm-6.18-2cpu": ([36551, 36834], [10, 0]),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_captures_give_known_counts(name):
    rx, tx = KNOWN[name]
    counts, problems = parse_softirqs((DATA / name).read_text())
    assert problems == []
    assert sorted(counts) == list(range(len(rx)))
    assert [counts[c].net_rx for c in range(len(rx))] == rx
    assert [counts[c].net_tx for c in range(len(tx))] == tx
    assert all(counts[c].cpu == c for c in counts)


def test_every_reference_capture_is_covered():
    files = {str(p.relative_to(DATA)) for p in (DATA / "netutils-linux").rglob("softirqs*")}
    assert files == {k for k in KNOWN if k.startswith("netutils-linux/")}


def test_header_without_offline_cpu_maps_columns_by_id():
    """GIVEN a header CPU0 CPU1 CPU3 (CPU2 offline) THEN the third column is CPU 3."""
    counts, problems = parse_softirqs((DATA / "online-only-cpu2-offline").read_text())
    assert problems == []
    assert counts == {
        0: SoftirqCounts(0, 1180153410, 17),
        1: SoftirqCounts(1, 0, 4294967295),
        3: SoftirqCounts(3, 3497390485, 3),
    }


def test_vendor_line_above_header_and_second_table():
    text = (
        "MAX_SOFTIRQ_RESTART=10\n"
        " Softirq        CPU0       CPU1       \n"
        "  NET_TX:          5          6\n"
        "  NET_RX:        100        200\n"
        "                    CPU0       CPU1       \n"
        " DURATION_MS:          1          2\n"
        "      NET_RX:          9          9\n"
    )
    counts, problems = parse_softirqs(text)
    assert problems == []
    assert counts == {0: SoftirqCounts(0, 100, 5), 1: SoftirqCounts(1, 200, 6)}


def test_short_row_is_a_problem_not_a_crash():
    text = (DATA / "vm-6.18-2cpu").read_text().replace("NET_RX:      36551", "NET_RX:")
    counts, problems = parse_softirqs(text)
    assert counts == {}
    assert len(problems) == 1 and "NET_RX row has 1 counts for 2 CPUs" in problems[0].message


def test_missing_rows_and_garbage():
    counts, problems = parse_softirqs("                    CPU0\n          HI:          0\n")
    assert counts == {} and "no NET_RX or NET_TX row" in problems[0].message
    counts, problems = parse_softirqs("")
    assert counts == {} and "no CPU header" in problems[0].message
    counts, problems = parse_softirqs("      CPU0\n  NET_TX: x\n  NET_RX: 1\n")
    assert counts == {} and "non-number" in problems[0].message


def test_missing_file_is_a_problem(tmp_path):
    counts, problems = read_softirqs(SysRoot(str(tmp_path)))
    assert counts == {}
    assert "cannot read /proc/softirqs" in problems[0].message


# --- the live kernel -----------------------------------------------------------------


@pytest.mark.live
def test_live_softirqs_cover_the_kernels_cpus():
    """The kernel prints a column per possible CPU; every online one is among them."""
    counts, problems = read_softirqs(LIVE)
    assert problems == []
    possible, _ = read_possible_cpus(LIVE)
    online, _ = read_online_cpus(LIVE)
    assert tuple(sorted(counts)) == possible
    assert set(online) <= set(counts)
    assert all(counts[c].net_rx > 0 for c in online)  # every CPU has received something


@pytest.mark.lab
def test_live_net_rx_rises_when_packets_cross_the_veth(veth_lab):
    """Packets sent into the lab's namespace are received through the backlog, one NET_RX
    softirq run per packet or so on the sending CPU; the total must rise with them."""
    n = 400
    before, p1 = read_softirqs(LIVE)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((veth_lab.host_ip, 0))
        for _ in range(n):
            s.sendto(b"nettop", (veth_lab.peer_ip, 9))
    after, p2 = read_softirqs(LIVE)
    assert p1 == p2 == []
    rise = sum(after[c].net_rx - before[c].net_rx for c in after)
    assert rise >= n // 2, rise
