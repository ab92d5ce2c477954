"""SysRoot.live: the running kernel whatever spelling of `/` names it, never a tree."""

from __future__ import annotations

import os

from nettop.kernel.sysroot import SysRoot


def test_live_is_any_path_that_resolves_to_the_root_and_follows_the_working_directory(tmp_path, monkeypatch):
    link = tmp_path / "slash"
    os.symlink("/", link)
    tree = tmp_path / "tree"
    tree.mkdir()
    assert SysRoot("/").live and SysRoot("//").live and SysRoot("/proc/..").live and SysRoot(str(link)).live
    assert not SysRoot(str(tree)).live and not SysRoot(str(tree)).live  # asked twice: the same answer
    monkeypatch.chdir("/")
    assert SysRoot(".").live
    monkeypatch.chdir(tree)
    assert not SysRoot(".").live  # relative: resolved where the process is now


def test_read_head_is_the_text_before_the_stop_of_the_live_kernel_and_of_a_tree(tmp_path):
    import pytest
    live = SysRoot("/")
    head = live.read_head("proc/stat", "\nintr")
    assert head.startswith("cpu ") and "intr" not in head and head.count("\ncpu") >= 1
    (tmp_path / "f").write_bytes(b"a b\nintr 1 2\nctxt 3\n")
    (tmp_path / "g").write_bytes(b"a b\n")
    tree = SysRoot(str(tmp_path))
    assert tree.read_head("f", "\nintr") == "a b"
    assert tree.read_head("g", "\nintr") == "a b\n"  # no stop: the whole text
    with pytest.raises(FileNotFoundError):
        tree.read_head("missing", "\nintr")


def test_a_live_file_read_in_two_passes_is_held_read_afresh_let_go_and_never_stale(veth_lab):
    """HeldDir holds what every pass reads (the settings on screen) on the live kernel: the
    held file shows a new value at once, is closed after a pass that skips it, and when
    its interface goes (and comes back under the same name) answers as a fresh open."""
    import pytest
    from lab import run

    from nettop.kernel.sysroot import LIVE, HeldDir

    ifname = veth_lab.host_if
    mask = "rx-1/rps_cpus"
    path = f"/sys/class/net/{ifname}/queues/{mask}"
    d = HeldDir(LIVE, f"sys/class/net/{ifname}/queues")
    try:
        for _ in range(3):
            d.begin()
            assert int(d.read(mask), 16) == 0
        assert d.held == 1
        with open(path, "w") as f:
            f.write("1")
        d.begin()
        assert int(d.read(mask), 16) == 1 and d.held == 1
        d.begin()  # a pass that does not read it
        d.begin()
        assert d.held == 0
        for _ in range(2):
            d.begin()
            d.read(mask)
        assert d.held == 1
        run(["ip", "link", "del", ifname])
        d.begin()
        with pytest.raises(FileNotFoundError):
            d.read(mask)
        assert d.held == 0
        run(["ip", "link", "add", ifname, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
             "peer", "name", f"{ifname[:-1]}p", "numtxqueues", "2", "numrxqueues", "2"])
        d.begin()
        assert int(d.read(mask), 16) == 0  # the new device's, not the held one's 1
    finally:
        d.close()
        run(["ip", "link", "del", ifname], check=False)


def test_a_trees_files_are_never_held(tmp_path):
    """A captured or generated tree's file may be replaced by rename or unlinked, and a
    held descriptor would go on giving its old bytes: only the live kernel holds."""
    from nettop.kernel.sysroot import HeldDir

    q = tmp_path / "sys/class/net/eth0/queues/rx-0"
    q.mkdir(parents=True)
    (q / "rps_cpus").write_text("0\n")
    d = HeldDir(SysRoot(str(tmp_path)), "sys/class/net/eth0/queues")
    for _ in range(3):
        d.begin()
        assert d.read("rx-0/rps_cpus") == b"0\n"
    assert d.held == 0
    tmp = q / "new"
    tmp.write_text("3\n")
    os.replace(tmp, q / "rps_cpus")
    d.begin()
    assert d.read("rx-0/rps_cpus") == b"3\n"
    d.close()
