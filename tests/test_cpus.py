"""CPU lists and masks: the kernel's spellings, checked against what this kernel prints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nettop.collectors.cpus import (
    format_cpu_list,
    format_cpu_mask,
    parse_cpu_list,
    parse_cpu_mask,
    read_online_cpus,
    read_possible_cpus,
)
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data"


# --- lists ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, cpus", [
    ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11)),
    ("", ()),
    ("\n", ()),
    ("5\n", (5,)),
    ("0-1", (0, 1)),
    ("3,1,2", (1, 2, 3)),
    ("0-2,1-3", (0, 1, 2, 3)),
    ("0-15:2/4", (0, 1, 4, 5, 8, 9, 12, 13)),  # kernel's strided range: first 2 of each 4
    ("128-130,255", (128, 129, 130, 255)),
])
def test_parse_cpu_list(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "0,,1", "0x1", "1-2:3", "0-7:0/4",
                                  "0-7:5/4", "1 2"])
def test_parse_cpu_list_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


@pytest.mark.parametrize("cpus, text", [
    ((0, 1, 2, 3, 8, 10, 11), "0-3,8,10-11"),
    ((), ""),
    ((7,), "7"),
    ((0, 1), "0-1"),  # the kernel prints a range for two CPUs too
    ([3, 1, 2, 2], "1-3"),
    ((0, 2, 4), "0,2,4"),
])
def test_format_cpu_list(cpus, text):
    assert format_cpu_list(cpus) == text


def test_list_round_trip_of_every_small_set():
    for bits in range(1 << 10):
        cpus = tuple(i for i in range(10) if bits >> i & 1)
        assert parse_cpu_list(format_cpu_list(cpus)) == cpus


# --- masks ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, cpus", [
    ("00000000,0000000f", (0, 1, 2, 3)),
    ("f0", (4, 5, 6, 7)),
    ("0", ()),
    ("3\n", (0, 1)),
    ("1,00000000", (32,)),
    ("80000000,00000001", (0, 63)),
    ("f,0", (32, 33, 34, 35)),  # each comma group is a 32-bit word, however short
    ("FF", tuple(range(8))),
])
def test_parse_cpu_mask(text, cpus):
    assert parse_cpu_mask(text) == cpus


def test_parse_4096_cpu_mask():
    groups = ["00000000"] * 128
    groups[0] = "80000000"  # CPU 4095
    groups[-1] = "00000100"  # CPU 8
    assert parse_cpu_mask(",".join(groups)) == (8, 4095)


@pytest.mark.parametrize("text", ["", "g", "0x3", "-1", "123456789,0", "1,,0", ","])
def test_parse_cpu_mask_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_cpu_mask(text)


@pytest.mark.parametrize("cpus, ncpus, text", [
    ((), 2, "0"),
    ((0, 1), 2, "3"),
    ((1,), 4, "2"),
    ((0, 1, 2, 3), 8, "0f"),
    ((4, 5, 6, 7), 8, "f0"),
    ((0,), 32, "00000001"),
    ((0, 1, 2, 3), 64, "00000000,0000000f"),
    ((0, 35), 36, "8,00000001"),
    ((32,), 33, "1,00000000"),
    ((), 96, "00000000,00000000,00000000"),
])
def test_format_cpu_mask_as_sysfs_prints_it(cpus, ncpus, text):
    assert format_cpu_mask(cpus, ncpus) == text


def test_format_cpu_mask_rejects_cpu_beyond_ncpus():
    with pytest.raises(ValueError):
        format_cpu_mask((2,), 2)
    with pytest.raises(ValueError):
        format_cpu_mask((-1,), 2)


def test_mask_round_trip_of_every_small_set():
    for ncpus in (1, 3, 8, 33, 40):
        for bits in range(0, 1 << min(ncpus, 10)):
            cpus = tuple(i for i in range(ncpus) if bits >> i & 1)
            assert parse_cpu_mask(format_cpu_mask(cpus, ncpus)) == cpus


# --- readers on captured trees -------------------------------------------------------


def _tree(tmp_path: Path, online: str | None, stat_file: str | None) -> SysRoot:
    cpu_dir = tmp_path / "sys/devices/system/cpu"
    cpu_dir.mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    if online is not None:
        (cpu_dir / "online").write_text(online)
    if stat_file is not None:
        (tmp_path / "proc/stat").write_text((DATA / "stat" / stat_file).read_text())
    return SysRoot(str(tmp_path))


def test_online_cpus_from_sysfs_with_a_gap(tmp_path):
    cpus, problems = read_online_cpus(_tree(tmp_path, "0,2\n", None))
    assert cpus == (0, 2) and problems == []


def test_online_cpus_fall_back_to_proc_stat(tmp_path):
    cpus, problems = read_online_cpus(_tree(tmp_path, None, "offline-cpu1-cpu3"))
    assert cpus == (0, 2)
    assert len(problems) == 1 and "devices/system/cpu/online" in problems[0].message


def test_online_cpus_garbled_sysfs_falls_back_and_says_so(tmp_path):
    cpus, problems = read_online_cpus(_tree(tmp_path, "zero\n", "old-2.6.9-7col"))
    assert cpus == (0, 1)
    assert "cannot parse" in problems[0].message


def test_online_cpus_nothing_readable(tmp_path):
    cpus, problems = read_online_cpus(_tree(tmp_path, None, None))
    assert cpus == ()
    assert {p.source for p in problems} == {"sys/devices/system/cpu/online", "proc/stat"}
    assert all("not present" in p.message for p in problems)


# --- the live kernel -----------------------------------------------------------------


@pytest.mark.live
def test_live_online_cpus_match_the_kernel():
    cpus, problems = read_online_cpus(LIVE)
    assert problems == []
    assert cpus == tuple(sorted(int(d[3:]) for d in os.listdir("/sys/devices/system/cpu")
                                if d[3:].isdigit() and _online(d)))
    assert len(cpus) == os.cpu_count()


def _online(d: str) -> bool:
    path = f"/sys/devices/system/cpu/{d}/online"
    return not os.path.exists(path) or open(path).read().strip() == "1"


def _nr_cpu_ids() -> int:
    possible, problems = read_possible_cpus(LIVE)
    assert problems == [] and possible
    return max(possible) + 1


@pytest.mark.live
def test_live_irq_masks_agree_with_their_lists():
    """Every IRQ's smp_affinity (mask) and smp_affinity_list name the same CPUs."""
    ncpus = _nr_cpu_ids()
    checked = 0
    for irq in os.listdir("/proc/irq"):
        base = f"/proc/irq/{irq}"
        if not os.path.exists(f"{base}/smp_affinity_list"):
            continue
        mask = open(f"{base}/smp_affinity").read()
        lst = open(f"{base}/smp_affinity_list").read()
        assert parse_cpu_mask(mask) == parse_cpu_list(lst), irq
        assert format_cpu_mask(parse_cpu_list(lst), ncpus) == mask.strip(), irq
        assert format_cpu_list(parse_cpu_mask(mask)) == lst.strip(), irq
        checked += 1
    assert checked > 0


@pytest.mark.lab
def test_live_rps_mask_written_by_us_reads_back_identically(veth_lab):
    """A mask in our spelling is accepted by the kernel and printed back unchanged."""
    ncpus = _nr_cpu_ids()
    path = f"/sys/class/net/{veth_lab.host_if}/queues/rx-0/rps_cpus"
    assert open(path).read().strip() == format_cpu_mask((), ncpus)
    for cpus in [(0,), (ncpus - 1,), tuple(range(ncpus))]:
        with open(path, "w") as f:
            f.write(format_cpu_mask(cpus, ncpus))
        text = open(path).read().strip()
        assert text == format_cpu_mask(cpus, ncpus)
        assert parse_cpu_mask(text) == cpus
