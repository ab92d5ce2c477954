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


def test_read_whole_gives_every_byte_of_files_of_any_size_and_of_a_seq_file_longer_than_one_read(tmp_path):
    """GIVEN regular files around the first read's size (64 KiB) and /proc/kallsyms (a seq
    file of megabytes, which the kernel gives in pieces that stop short of the size asked)
    WHEN read with read_whole THEN each is whole, as a buffered read of it gives."""
    from nettop.kernel.sysroot import read_whole

    for size in (0, 1, 65535, 65536, 65537, 3 * 65536 + 5, 1 << 21):
        path = tmp_path / f"f{size}"
        data = bytes((i * 7) % 251 for i in range(size))
        path.write_bytes(data)
        assert read_whole(str(path)) == data, size
    for _ in range(5):  # a BPF program loaded by another process between the reads adds symbols
        with open("/proc/kallsyms", "rb") as f:
            expected = f.read()
        got = read_whole("/proc/kallsyms")
        if got == expected:
            break
    assert len(expected) > 1 << 20 and got == expected


def test_a_live_file_read_with_hold_is_held_read_afresh_let_go_and_never_stale(veth_lab):
    """HeldDir holds what its caller says it reads every pass (the settings on screen) on
    the live kernel: the held file shows a new value at once, is closed after a pass that
    does not read it with `hold`, and when its interface goes (and comes back under the
    same name) answers as a fresh open."""
    import pytest
    from lab import run

    from nettop.kernel.sysroot import LIVE, HeldDir, HoldBudget

    ifname = veth_lab.host_if
    mask = "rx-1/rps_cpus"
    path = f"/sys/class/net/{ifname}/queues/{mask}"
    budget = HoldBudget(1)
    d = HeldDir(LIVE, f"sys/class/net/{ifname}/queues", budget)
    try:
        for _ in range(3):  # the rotation's reads (no hold) hold nothing
            d.begin()
            d.read(mask)
            d.read("rx-0/rps_cpus")
        assert d.held == 0
        d.begin()
        assert int(d.read(mask, hold=True), 16) == 0
        assert int(d.read("rx-0/rps_cpus", hold=True), 16) == 0  # past the budget: not held
        assert d.held == 1 and budget.left == 0
        with open(path, "w") as f:
            f.write("1")
        d.begin()
        assert int(d.read(mask, hold=True), 16) == 1 and d.held == 1  # sysfs shows it afresh
        d.begin()
        assert int(d.read(mask), 16) == 1  # read without hold: still held in this pass...
        d.begin()
        assert d.held == 0 and budget.left == 1  # ...and let go at the next
        d.begin()
        d.read(mask, hold=True)
        d.release()
        assert d.held == 0 and budget.left == 1
        d.begin()
        d.read(mask, hold=True)
        run(["ip", "link", "del", ifname])
        d.begin()
        with pytest.raises(FileNotFoundError):
            d.read(mask, hold=True)
        assert d.held == 0 and budget.left == 1
        run(["ip", "link", "add", ifname, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
             "peer", "name", f"{ifname[:-1]}p", "numtxqueues", "2", "numrxqueues", "2"])
        d.begin()
        assert int(d.read(mask, hold=True), 16) == 0  # the new device's, not the held one's 1
    finally:
        d.close()
        run(["ip", "link", "del", ifname], check=False)


def test_a_held_proc_irq_file_shows_the_new_affinity_at_once(deflate_irq):
    """/proc/irq/N files are seq files: read again from offset 0 they show the IRQ's
    affinity as of now (a harmless IRQ moved, and put back by the fixture)."""
    from nettop.kernel.sysroot import LIVE, HeldDir, HoldBudget

    name = f"{deflate_irq}/smp_affinity_list"
    d = HeldDir(LIVE, "proc/irq", HoldBudget(4))
    try:
        d.begin()
        first = d.read(name, hold=True).decode().strip()
        target = "1" if first != "1" else "0"
        with open(f"/proc/irq/{name}", "w") as f:
            f.write(target)
        d.begin()
        assert d.read(name, hold=True).decode().strip() == target and d.held == 1
    finally:
        d.close()


def test_a_trees_files_are_never_held(tmp_path):
    """A captured or generated tree's file may be replaced by rename or unlinked, and a
    held descriptor would go on giving its old bytes: only the live kernel holds."""
    from nettop.kernel.sysroot import HeldDir, HoldBudget

    q = tmp_path / "sys/class/net/eth0/queues/rx-0"
    q.mkdir(parents=True)
    (q / "rps_cpus").write_text("0\n")
    d = HeldDir(SysRoot(str(tmp_path)), "sys/class/net/eth0/queues", HoldBudget(8))
    for _ in range(3):
        d.begin()
        assert d.read("rx-0/rps_cpus", hold=True) == b"0\n"
    assert d.held == 0
    tmp = q / "new"
    tmp.write_text("3\n")
    os.replace(tmp, q / "rps_cpus")
    d.begin()
    assert d.read("rx-0/rps_cpus", hold=True) == b"3\n"
    d.close()
