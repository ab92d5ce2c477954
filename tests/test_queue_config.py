"""RPS/RFS/XPS read-back: captured queue trees (ordering, verbatim masks, unreadable
files, a non-root reader meeting EACCES), eth0's single virtio queue pair, and settings
written to a lab veth through sysfs and read back."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from pathlib import Path

import pytest

from nettop.collectors.queue_config import parse_queue_dirs, read_queue_config
from nettop.model.snapshot import QueueConfig
from nettop.kernel.sysroot import LIVE, SysRoot


def make_queues(tmp: Path, ifname: str, rx: dict[int, dict], tx: dict[int, dict]) -> SysRoot:
    """sys/class/net/IF/queues/{rx,tx}-N/<file>; a None value makes the name a directory."""
    for kind, queues in (("rx", rx), ("tx", tx)):
        for n, files in queues.items():
            d = tmp / "sys/class/net" / ifname / "queues" / f"{kind}-{n}"
            d.mkdir(parents=True)
            for name, text in files.items():
                if text is None:
                    (d / name).mkdir()
                else:
                    (d / name).write_text(text)
    return SysRoot(str(tmp))


def test_queue_dirs_sort_numerically_rx_first():
    names = ["tx-10", "rx-10", "rx-9", "tx-0", "rx-0", "tx-9", "power", "rx-x"]
    assert parse_queue_dirs(names) == [("rx", 0), ("rx", 9), ("rx", 10),
                                       ("tx", 0), ("tx", 9), ("tx", 10)]


def test_masks_are_kept_exactly_as_the_kernel_prints_them(tmp_path):
    root = make_queues(
        tmp_path, "ens1f0",
        rx={0: {"rps_cpus": "00000000,0000000f\n", "rps_flow_cnt": "4096\n"}},
        tx={0: {"xps_cpus": "00000000,00000001\n", "xps_rxqs": "0000\n"}},
    )
    got, problems = read_queue_config(root, "ens1f0")
    assert problems == []
    assert got == (
        QueueConfig("rx", 0, rps_cpus="00000000,0000000f", rps_flow_cnt=4096),
        QueueConfig("tx", 0, xps_cpus="00000000,00000001", xps_rxqs="0000"),
    )


def test_64_queues_come_back_in_queue_order(tmp_path):
    root = make_queues(
        tmp_path, "eth2",
        rx={n: {"rps_cpus": f"{1 << (n % 32):08x},00000000\n", "rps_flow_cnt": "0\n"}
            for n in range(64)},
        tx={n: {"xps_cpus": "ffffffff,ffffffff\n", "xps_rxqs": "0\n"} for n in range(64)},
    )
    got, problems = read_queue_config(root, "eth2")
    assert problems == []
    assert [(q.kind, q.index) for q in got] == (
        [("rx", n) for n in range(64)] + [("tx", n) for n in range(64)])
    assert got[33].rps_cpus == "00000002,00000000"


def test_missing_files_are_none_without_problem(tmp_path):
    # a kernel without CONFIG_RPS/CONFIG_XPS, or a single-queue device's xps_cpus (ENOENT)
    root = make_queues(tmp_path, "eth0", rx={0: {}}, tx={0: {"xps_rxqs": "0\n"}})
    got, problems = read_queue_config(root, "eth0")
    assert problems == []
    assert got == (QueueConfig("rx", 0), QueueConfig("tx", 0, xps_rxqs="0"))


def test_gone_interface_is_empty_without_problem(tmp_path):
    assert read_queue_config(SysRoot(str(tmp_path)), "gone0") == ((), [])


def test_unreadable_files_make_one_problem_per_file_kind(tmp_path):
    root = make_queues(
        tmp_path, "eth3",
        rx={n: {"rps_cpus": None, "rps_flow_cnt": "0\n"} for n in range(4)},
        tx={0: {"xps_cpus": "1\n", "xps_rxqs": None}},
    )
    got, problems = read_queue_config(root, "eth3")
    assert [q.rps_cpus for q in got if q.kind == "rx"] == [None] * 4
    assert [q.rps_flow_cnt for q in got if q.kind == "rx"] == [0] * 4
    assert got[-1] == QueueConfig("tx", 0, xps_cpus="1")
    assert len(problems) == 2
    rps, xps = sorted(problems, key=lambda p: p.source)
    assert "rx-0/rps_cpus" in rps.message and "3 more rx queues of eth3" in rps.message
    assert "tx-0/xps_rxqs" in xps.message and "more" not in xps.message
    assert all("\n" not in p.message for p in problems)


def test_a_file_the_devices_queues_lack_is_asked_once_per_device_not_once_per_queue(tmp_path, monkeypatch):
    """GIVEN a device whose tx queues have no xps_rxqs (Linux before 4.18), and a listed rx
    queue whose directory went before the read; WHEN its queues are read twice through
    one QueueFiles (as the settings rotation reads); THEN xps_rxqs is opened once in all:
    the kernel makes the same attributes for every queue of a device. Each tx queue reads
    None for it, with no problem; the queue that went (no mask either) marks nothing: the
    other rx queues' rps_flow_cnt are still read."""
    from nettop.collectors.queue_config import QueueFiles, read_queues

    root = make_queues(tmp_path, "eth6", rx={n: {"rps_cpus": "1\n", "rps_flow_cnt": f"{n}\n"} for n in (0, 1)},
                       tx={n: {"xps_cpus": "2\n"} for n in range(4)})
    asked: list[str] = []
    real = os.open

    def counting(path, flags, *a, **kw):  # type: ignore[no-untyped-def]
        asked.append(str(path))
        return real(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", counting)
    files = QueueFiles(root, "eth6")
    queues = [("rx", 7), ("rx", 0), ("rx", 1)] + [("tx", n) for n in range(4)]
    try:
        for _ in range(2):
            got, problems = read_queues(root, "eth6", queues, None, 1.0, files)
            assert problems == []
            assert [(q.index, q.rps_flow_cnt) for q in got if q.kind == "rx"] == [(7, None), (0, 0), (1, 1)]
            assert [(q.xps_cpus, q.xps_rxqs) for q in got if q.kind == "tx"] == [("2", None)] * 4
    finally:
        files.close()
    assert sum(p.endswith("/xps_rxqs") for p in asked) == 1
    assert sum(p.endswith("/rps_flow_cnt") for p in asked) == 6  # rx-7's twice, as its mask


def test_malformed_flow_count(tmp_path):
    root = make_queues(tmp_path, "eth4", rx={0: {"rps_cpus": "0\n", "rps_flow_cnt": "lots\n"}},
                       tx={})
    got, problems = read_queue_config(root, "eth4")
    assert got == (QueueConfig("rx", 0, rps_cpus="0"),)
    assert len(problems) == 1 and "'lots'" in problems[0].message


def test_non_root_reader_is_told_to_run_as_root():
    # GIVEN xps_cpus files only root may read, and a reader that really is not root
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to nobody")
    tmp = Path(tempfile.mkdtemp(prefix="nettop-qc-"))
    try:
        os.chmod(tmp, 0o755)
        make_queues(tmp, "eth5", rx={0: {"rps_cpus": "1\n", "rps_flow_cnt": "0\n"}},
                    tx={n: {"xps_cpus": "3\n", "xps_rxqs": "0\n"} for n in range(2)})
        for n in range(2):
            os.chmod(tmp / f"sys/class/net/eth5/queues/tx-{n}/xps_cpus", 0o600)
        got, problems = _as_nobody(lambda: read_queue_config(SysRoot(str(tmp)), "eth5"))
    finally:
        shutil.rmtree(tmp)
    assert got[0] == QueueConfig("rx", 0, rps_cpus="1", rps_flow_cnt=0)
    assert [q.xps_cpus for q in got[1:]] == [None, None]
    assert [q.xps_rxqs for q in got[1:]] == ["0", "0"]
    assert [p.message for p in problems] == [
        "cannot read xps_cpus of eth5 (2 queues): permission denied; run nettop as root to see it"]


def _as_nobody(fn):
    """Run fn() in a forked child with uid/gid nobody and return its result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            data = pickle.dumps(fn())
            os.write(w, data)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(b"".join(chunks))


@pytest.mark.live
def test_live_eth0_single_queue_has_no_xps_cpus_and_no_problem():
    if not os.path.isdir("/sys/class/net/eth0/queues/tx-0"):
        pytest.skip("no eth0")
    got, problems = read_queue_config(LIVE, "eth0")
    assert problems == []
    queues = {(q.kind, q.index): q for q in got}
    assert ("rx", 0) in queues and ("tx", 0) in queues
    assert queues[("rx", 0)].rps_cpus == LIVE.read_line("sys/class/net/eth0/queues/rx-0/rps_cpus")
    try:
        LIVE.read_line("sys/class/net/eth0/queues/tx-0/xps_cpus")
    except OSError:  # single-queue virtio_net: the kernel answers ENOENT
        assert queues[("tx", 0)].xps_cpus is None
    else:
        assert queues[("tx", 0)].xps_cpus is not None


@pytest.mark.lab
def test_lab_rps_rfs_xps_written_through_sysfs_read_back(veth_lab):
    ifname = veth_lab.host_if
    qdir = Path("/sys/class/net") / ifname / "queues"
    writes = {
        qdir / "rx-1/rps_cpus": "2",
        qdir / "rx-1/rps_flow_cnt": "100",
        qdir / "rx-3/rps_cpus": "3",
        qdir / "tx-2/xps_cpus": "1",
        qdir / "tx-2/xps_rxqs": "5",
    }
    before, _ = read_queue_config(LIVE, ifname)
    saved = {p: p.read_text().strip() for p in writes}
    try:
        for p, text in writes.items():
            p.write_text(text + "\n")
        got, problems = read_queue_config(LIVE, ifname)
        assert problems == []
        q = {(c.kind, c.index): c for c in got}
        assert len(got) == 8
        assert q[("rx", 1)].rps_cpus == "2"
        assert q[("rx", 1)].rps_flow_cnt == 128  # the kernel rounds up to a power of two
        assert q[("rx", 3)].rps_cpus == "3"
        assert q[("tx", 2)].xps_cpus == "1"
        assert q[("tx", 2)].xps_rxqs == "5"
        assert q[("rx", 0)] == before[0]  # untouched queues unchanged
        # what was read is what the kernel prints, byte for byte
        for p in writes:
            kind, n = p.parent.name.split("-")
            attr = p.name if p.name != "rps_flow_cnt" else None
            if attr:
                assert getattr(q[(kind, int(n))], attr) == p.read_text().rstrip("\n")
    finally:
        for p, text in saved.items():
            p.write_text(text + "\n")
    assert read_queue_config(LIVE, ifname)[0] == before
