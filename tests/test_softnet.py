"""/proc/net/softnet_stat: every column layout, CPU ids from the column or the online list."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from nettop.collectors.cpus import read_online_cpus
from nettop.collectors.softnet import parse_softnet, read_softnet
from nettop.model.snapshot import SoftnetRow
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data" / "softnet"

# First column (processed) of each real 8-CPU capture, copied from the files; see
# netutils-linux/NOTICE. time_squeeze (third column) is the same in all five.
PROCESSED = {
    "softnet_stat1": [0x1ba0fbc3, 0x05963a92, 0xc31633d5, 0xa38e3d47, 0xcb74e599, 0xc6aa8ee7,
                      0x871dd262, 0x7c0f3f79],
    "softnet_stat2": [0x1ba105cc, 0x05963aa8, 0xc31633da, 0xa38e3d53, 0xcb74e5b5, 0xc6aa8ef4,
                      0x871dd262, 0x7c0f3f79],
    "softnet_stat3": [0x1ba1bc14, 0x05963ae3, 0xc31633e2, 0xa38e3d56, 0xcb74e839, 0xc6aa8efc,
                      0x871dd27e, 0x7c0f3f79],
    "softnet_stat4": [0x1ba287d6, 0x05963ae8, 0xc31633ec, 0xa38e3d67, 0xcb74e962, 0xc6aa8f03,
                      0x871dd296, 0x7c0f3f7f],
    "softnet_stat5": [0x1ba2928e, 0x05963ae8, 0xc3163428, 0xa38e3d81, 0xcb74e9ae, 0xc6aa8f29,
                      0x871dd300, 0x7c0f3fb3],
}
SQUEEZE = [0x1b3, 0xe1, 0xcb, 0xcf, 0xf9, 0xd9, 0xb6, 0xc3]


def _parse(name: str, online: tuple[int, ...] | None = None):
    return parse_softnet((DATA / name).read_text(), online)


@pytest.mark.parametrize("name", sorted(PROCESSED))
@pytest.mark.parametrize("online", [None, tuple(range(8))])
def test_real_ten_column_captures(name, online):
    rows, problems = _parse(f"netutils-linux/{name}", online)
    assert problems == []
    assert sorted(rows) == list(range(8))
    assert [rows[c].processed for c in range(8)] == PROCESSED[name]
    assert [rows[c].time_squeeze for c in range(8)] == SQUEEZE
    for c, r in rows.items():
        assert (r.cpu, r.dropped, r.received_rps, r.flow_limit_count) == (c, 0, 0, 0)
        assert r.backlog is None and r.cpu_from_column is False


def test_every_reference_capture_is_covered():
    assert {p.name for p in (DATA / "netutils-linux").glob("softnet_stat*")} == set(PROCESSED)


def test_real_fifteen_column_capture_of_this_vm():
    rows, problems = _parse("vm-6.18-2cpu.15col")
    assert problems == []
    assert rows == {
        0: SoftnetRow(0, 0x97e5, 0, 0, 0, 0, backlog=0, cpu_from_column=True),
        1: SoftnetRow(1, 0x9c26, 0, 0, 0, 0, backlog=0, cpu_from_column=True),
    }


EXPECTED_OFFLINE_CPU2 = {
    0: SoftnetRow(0, 0x1ba0fbc3, 5, 0x1b3, 0x2f1, 3, backlog=0, cpu_from_column=True),
    1: SoftnetRow(1, 0x05963a92, 0, 0xe1, 0x10, 0, backlog=2, cpu_from_column=True),
    3: SoftnetRow(3, 0xffffffff, 0x12, 0x7, 0, 0, backlog=4, cpu_from_column=True),
}


@pytest.mark.parametrize("name", ["offline-cpu2.13col", "offline-cpu2.15col"])
@pytest.mark.parametrize("online", [None, (0, 1, 3), (0, 1, 2, 3)])
def test_cpu_column_wins_and_offline_cpu_is_absent(name, online):
    """GIVEN CPU 2 offline and a kernel printing the CPU id THEN the rows are 0, 1, 3,
    even when the caller's online list is stale."""
    rows, problems = _parse(name, online)
    assert problems == []
    assert rows == EXPECTED_OFFLINE_CPU2


def test_no_cpu_column_maps_lines_onto_the_online_cpus():
    """GIVEN CPUs 0, 1, 3 online and an 11-column kernel THEN line 3 is CPU 3."""
    rows, problems = _parse("gap.11col", (0, 1, 3))
    assert problems == []
    assert sorted(rows) == [0, 1, 3]
    assert rows[3] == SoftnetRow(3, 0xffffffff, 0x12, 0x7, 0, 0, backlog=None)
    assert rows[0].received_rps == 0x2f1 and rows[0].flow_limit_count == 3
    assert not any(r.cpu_from_column for r in rows.values())


def test_no_cpu_column_and_no_online_list_uses_line_numbers():
    rows, problems = _parse("gap.11col")
    assert problems == [] and sorted(rows) == [0, 1, 2]
    assert rows[2].processed == 0xffffffff


def test_line_count_not_matching_online_cpus_is_reported():
    rows, problems = _parse("gap.11col", (0, 1, 2, 3))
    assert len(problems) == 1 and "3 lines but 4 CPUs are online" in problems[0].message
    assert sorted(rows) == [0, 1, 2]
    rows, problems = _parse("gap.11col", (0, 1))
    assert len(problems) == 1 and sorted(rows) == [0, 1]


def test_nine_column_layout_does_not_read_cpu_collision_as_rps():
    rows, problems = _parse("old.9col")
    assert problems == []
    assert rows == {
        0: SoftnetRow(0, 0xc0ffee, 1, 2, 0, 0, backlog=None),
        1: SoftnetRow(1, 0xbeef, 0, 4, 0, 0, backlog=None),
    }


def test_malformed_lines_are_skipped_but_keep_their_cpu_position():
    rows, problems = _parse("malformed.11col", (0, 1, 2, 3))
    assert len(problems) == 2
    assert all("softnet_stat" in p.message for p in problems)
    assert sorted(rows) == [0, 2]
    assert rows[2].processed == 0x102 and rows[2].time_squeeze == 4


def test_malformed_line_among_cpu_column_lines():
    text = (DATA / "offline-cpu2.13col").read_text().splitlines()
    text[1] = text[1][:40]
    rows, problems = parse_softnet("\n".join(text) + "\n", (0, 1, 3))
    assert sorted(rows) == [0, 3] and len(problems) == 1


def test_missing_file_is_a_problem(tmp_path):
    rows, problems = read_softnet(SysRoot(str(tmp_path)), (0, 1))
    assert rows == {} and "cannot read /proc/net/softnet_stat" in problems[0].message


def test_reader_on_a_captured_tree(tmp_path):
    (tmp_path / "proc/net").mkdir(parents=True)
    (tmp_path / "proc/net/softnet_stat").write_text((DATA / "gap.11col").read_text())
    rows, problems = read_softnet(SysRoot(str(tmp_path)), (0, 1, 3))
    assert problems == [] and sorted(rows) == [0, 1, 3]


# --- the live kernel -----------------------------------------------------------------


@pytest.mark.live
def test_live_rows_are_the_online_cpus_by_column():
    online, _ = read_online_cpus(LIVE)
    rows, problems = read_softnet(LIVE, online)
    assert problems == []
    assert tuple(sorted(rows)) == online
    assert all(r.cpu_from_column and r.backlog is not None for r in rows.values())


@pytest.mark.lab
def test_live_processed_rises_by_the_packets_sent_through_a_veth(veth_lab):
    """Every packet the peer namespace receives is counted in `processed` of some CPU."""
    n = 300
    online, _ = read_online_cpus(LIVE)
    before, _ = read_softnet(LIVE, online)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((veth_lab.host_ip, 0))
        for _ in range(n):
            s.sendto(b"nettop", (veth_lab.peer_ip, 9))
    # The receiving side may run later than sendto() returns: a busy CPU's NET_RX work
    # goes to ksoftirqd, which waits its turn. Read again until the backlog has been
    # processed (bounded); every packet is counted once it is.
    deadline = time.monotonic() + 5
    while True:
        after, problems = read_softnet(LIVE, online)
        rise = sum(after[c].processed - before[c].processed for c in after)
        if rise >= n or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert problems == []
    assert rise >= n, rise
