"""A per-CPU file whose text did not change gives the last tick's rows again, and its
problems; any change, and for softnet a change of the online CPUs, parses it again."""

from __future__ import annotations

from pathlib import Path

from nettop.collectors.cpustat import parse_stat, read_stat
from nettop.collectors.softirqs import parse_softirqs, read_softirqs
from nettop.collectors.softnet import parse_softnet, read_softnet
from nettop.collectors.unchanged import LastAnswer
from nettop.kernel.sysroot import SysRoot

STAT = "cpu  4 0 4 8\ncpu0 1 0 2 3 0 0 0 0 0 0\ncpu1 3 0 2 5 0 0 0 0 0 0\nintr 5 1 2\n"
SOFTIRQS = "       CPU0  CPU1\n   NET_TX:  1  2\n   NET_RX:  3  4\n"
SOFTNET = ("00000010 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000\n"
           "00000020 00000000 00000002 00000000 00000000 00000000 00000000 00000000 00000000\n")


def _tree(tmp_path: Path, stat: str = STAT, softirqs: str = SOFTIRQS, softnet: str = SOFTNET) -> SysRoot:
    (tmp_path / "proc/net").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/stat").write_text(stat)
    (tmp_path / "proc/softirqs").write_text(softirqs)
    (tmp_path / "proc/net/softnet_stat").write_text(softnet)
    return SysRoot(str(tmp_path))


def test_same_text_gives_the_same_rows_as_a_fresh_parse(tmp_path):
    root = _tree(tmp_path)
    stat, sirq, snet = LastAnswer(), LastAnswer(), LastAnswer()
    first = read_stat(root, stat), read_softirqs(root, sirq), read_softnet(root, (0, 1), snet)
    again = read_stat(root, stat), read_softirqs(root, sirq), read_softnet(root, (0, 1), snet)
    assert (stat.hits, sirq.hits, snet.hits) == (1, 1, 1)
    assert first == again == (parse_stat(STAT), parse_softirqs(SOFTIRQS), parse_softnet(SOFTNET, (0, 1)))
    for (rows, _), (kept, _) in zip(first, again):
        assert rows is not kept  # a new dict each tick...
        assert all(kept[c] is rows[c] for c in rows)  # ...of the same frozen rows


def test_a_changed_line_or_other_online_cpus_parse_again(tmp_path):
    root = _tree(tmp_path)
    stat, snet = LastAnswer(), LastAnswer()
    read_stat(root, stat), read_softnet(root, (0, 1), snet)
    _tree(tmp_path, stat=STAT.replace("cpu1 3", "cpu1 4"))
    times, _ = read_stat(root, stat)
    assert times[1].user == 4 and stat.hits == 0
    # /proc/stat's intr line is not parsed: a change there alone keeps the rows
    _tree(tmp_path, stat=STAT.replace("cpu1 3", "cpu1 4").replace("intr 5", "intr 6"))
    read_stat(root, stat)
    assert stat.hits == 1
    # softnet_stat without a CPU column: its lines belong to the online CPUs in order
    rows, _ = read_softnet(root, (0, 2), snet)
    assert sorted(rows) == [0, 2] and snet.hits == 0


def test_a_damaged_file_keeps_naming_its_damage_every_tick(tmp_path):
    root = _tree(tmp_path, softirqs="       CPU0  CPU1\n   NET_TX:  1  x\n   NET_RX:  3  4\n")
    sirq = LastAnswer()
    first = read_softirqs(root, sirq)
    again = read_softirqs(root, sirq)
    assert sirq.hits == 1 and first[1] and again == first
