"""BQL read-back: captured byte_queue_limits trees (this VM's virtio_net, a multi-queue
NIC, broken files), eth0's real tx-0, and a lab veth, which has no BQL on this kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nettop.collectors.bql import parse_bql, read_bql
from nettop.model.snapshot import BqlState
from nettop.kernel.sysroot import LIVE, SysRoot

# This VM's /sys/class/net/eth0/queues/tx-0/byte_queue_limits (virtio_net, kernel 6.18).
VM_TX0 = {
    "hold_time": "1000\n", "inflight": "0\n", "limit": "2317\n", "limit_max": "1879048192\n",
    "limit_min": "0\n", "stall_cnt": "0\n", "stall_max": "0\n", "stall_thrs": "0\n",
}


def make_bql(tmp: Path, ifname: str, tx: dict[int, dict[str, str] | None]) -> SysRoot:
    """tx-N/byte_queue_limits/<file>; a queue mapped to None has no byte_queue_limits dir;
    a file value None is a directory, "->x" a dangling symlink."""
    for n, files in tx.items():
        q = tmp / "sys/class/net" / ifname / "queues" / f"tx-{n}"
        q.mkdir(parents=True)
        (q / "xps_cpus").write_text("0\n")
        if files is None:
            continue
        (q / "byte_queue_limits").mkdir()
        for name, text in files.items():
            path = q / "byte_queue_limits" / name
            if text is None:
                path.mkdir()
            elif text.startswith("->"):
                os.symlink(text[2:], path)
            else:
                path.write_text(text)
    (tmp / "sys/class/net" / ifname / "queues" / "rx-0").mkdir(parents=True, exist_ok=True)
    return SysRoot(str(tmp))


def test_parse_bql():
    assert parse_bql(3, {"limit": "2317", "limit_max": "1879048192", "limit_min": "0",
                         "inflight": "1514"}) == BqlState(3, 2317, 1879048192, 0, 1514)
    with pytest.raises(ValueError):
        parse_bql(0, {"limit": "x", "limit_max": "1", "limit_min": "0", "inflight": "0"})


def test_vm_capture(tmp_path):
    got, problems = read_bql(make_bql(tmp_path, "eth0", {0: VM_TX0}), "eth0")
    assert problems == []
    assert got == (BqlState(0, limit=2317, limit_max=1879048192, limit_min=0, inflight=0),)


def test_multi_queue_nic_in_queue_order(tmp_path):
    tx = {n: {**VM_TX0, "limit": f"{1000 + n}\n", "inflight": f"{n * 1514}\n"}
          for n in range(12)}
    got, problems = read_bql(make_bql(tmp_path, "ens2", tx), "ens2")
    assert problems == []
    assert [b.queue for b in got] == list(range(12))
    assert got[10] == BqlState(10, 1010, 1879048192, 0, 15140)


def test_device_without_bql_is_empty_without_problem(tmp_path):
    got, problems = read_bql(make_bql(tmp_path, "veth0", {n: None for n in range(4)}), "veth0")
    assert (got, problems) == ((), [])


def test_gone_interface(tmp_path):
    assert read_bql(SysRoot(str(tmp_path)), "gone0") == ((), [])


def test_dangling_limit_max_skips_that_queue_with_one_line_problem(tmp_path):
    root = make_bql(tmp_path, "eth0", {0: VM_TX0, 1: {**VM_TX0, "limit_max": "->gone"}})
    got, problems = read_bql(root, "eth0")
    assert [b.queue for b in got] == [0]
    assert len(problems) == 1
    msg = problems[0].message
    assert "tx-1/byte_queue_limits/limit_max" in msg and "\n" not in msg


def test_directory_in_place_of_limit_is_a_problem_not_no_bql(tmp_path):
    root = make_bql(tmp_path, "eth0", {0: {**VM_TX0, "limit": None}, 1: VM_TX0})
    got, problems = read_bql(root, "eth0")
    assert [b.queue for b in got] == [1]
    assert len(problems) == 1 and "tx-0/byte_queue_limits/limit" in problems[0].message
    assert "directory" in problems[0].message.lower()


def test_missing_file_in_an_existing_bql_dir_is_a_problem(tmp_path):
    files = {k: v for k, v in VM_TX0.items() if k != "limit"}
    got, problems = read_bql(make_bql(tmp_path, "eth0", {0: files}), "eth0")
    assert got == ()
    assert len(problems) == 1 and "limit" in problems[0].source


def test_malformed_value(tmp_path):
    got, problems = read_bql(make_bql(tmp_path, "eth0", {0: {**VM_TX0, "inflight": "-\n"}}),
                             "eth0")
    assert got == ()
    assert len(problems) == 1 and "malformed" in problems[0].message


@pytest.mark.live
def test_live_eth0_tx0_matches_the_files():
    d = Path("/sys/class/net/eth0/queues/tx-0/byte_queue_limits")
    if not d.is_dir():
        pytest.skip("eth0 has no BQL here")
    got, problems = read_bql(LIVE, "eth0")
    assert problems == []
    assert got and got[0].queue == 0
    b = got[0]
    assert b.limit_max == int((d / "limit_max").read_text())
    assert b.limit_min == int((d / "limit_min").read_text())
    assert b.limit_min <= b.limit <= b.limit_max
    assert b.inflight >= 0


@pytest.mark.lab
def test_lab_veth_has_no_bql_on_this_kernel(veth_lab):
    # veth is an LLTX device: the kernel creates no byte_queue_limits for it
    qdir = Path("/sys/class/net") / veth_lab.host_if / "queues"
    assert (qdir / "tx-0").is_dir()
    if (qdir / "tx-0" / "byte_queue_limits").exists():
        got, problems = read_bql(LIVE, veth_lab.host_if)
        assert problems == [] and [b.queue for b in got] == [0, 1, 2, 3]
    else:
        assert read_bql(LIVE, veth_lab.host_if) == ((), [])
