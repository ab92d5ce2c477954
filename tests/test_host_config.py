"""Host sysctls and irqbalance detection: captured /proc/sys trees, the live kernel (a
harmless sysctl written and read back, cross-checked with `sysctl -n`), and irqbalance
found through its control socket, a pid check and a rate-limited /proc scan, live with
a dummy process whose comm is irqbalance."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nettop.collectors.host_config import (
    SYSCTLS,
    IrqbalanceCache,
    irqbalance_running,
    normalize,
    read_host_config,
    read_sysctls,
    scan_proc,
    sysctl_path,
)
from nettop.kernel.sysroot import LIVE, SysRoot

# This VM's values (kernel 6.18), as /proc/sys prints them.
VM_SYSCTLS = {
    "net/core/default_qdisc": "pfifo_fast\n",
    "net/core/rps_sock_flow_entries": "0\n",
    "net/core/netdev_max_backlog": "1000\n",
    "net/core/netdev_budget": "300\n",
    "net/core/netdev_budget_usecs": "8000\n",
    "net/core/dev_weight": "64\n",
    "net/core/rmem_max": "4194304\n",
    "net/core/wmem_max": "4194304\n",
    "net/core/rmem_default": "212992\n",
    "net/core/wmem_default": "212992\n",
    "net/core/busy_poll": "0\n",
    "net/core/busy_read": "0\n",
    "net/core/flow_limit_cpu_bitmap": "0\n",
    "net/ipv4/tcp_rmem": "4096\t131072\t33554432\n",
    "net/ipv4/tcp_wmem": "4096\t16384\t4194304\n",
}


def make_sys(tmp: Path, files: dict[str, str | None]) -> SysRoot:
    for rel, text in files.items():
        p = tmp / "proc/sys" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            p.mkdir()
        else:
            p.write_text(text)
    return SysRoot(str(tmp))


def add_proc(tmp: Path, pid: int, comm: str) -> None:
    (tmp / "proc" / str(pid)).mkdir(parents=True, exist_ok=True)
    (tmp / "proc" / str(pid) / "comm").write_text(comm + "\n")


def test_sysctl_path_and_normalize():
    assert sysctl_path("net.ipv4.tcp_rmem") == "proc/sys/net/ipv4/tcp_rmem"
    assert normalize("4096\t131072\t33554432\n") == "4096 131072 33554432"
    assert normalize("00000000,00000003\n") == "00000000,00000003"


def test_vm_capture(tmp_path):
    hc, problems = read_host_config(make_sys(tmp_path, VM_SYSCTLS))
    assert problems == []
    assert hc.default_qdisc == "pfifo_fast"
    assert hc.rps_sock_flow_entries == 0
    assert hc.irqbalance_running is False
    assert set(hc.sysctls) == set(SYSCTLS)
    assert hc.sysctls["net.core.netdev_budget"] == "300"
    assert hc.sysctls["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert "net.core.default_qdisc" not in hc.sysctls


def test_child_netns_view_lacks_init_only_sysctls_without_problem(tmp_path):
    # in a non-initial namespace net.core has no netdev_budget, rps_sock_flow_entries, ...
    only = {k: v for k, v in VM_SYSCTLS.items()
            if k.endswith(("tcp_rmem", "tcp_wmem", "somaxconn"))}
    hc, problems = read_host_config(make_sys(tmp_path, only))
    assert problems == []
    assert hc.default_qdisc is None and hc.rps_sock_flow_entries is None
    assert set(hc.sysctls) == {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}


def test_unreadable_and_malformed_values(tmp_path):
    root = make_sys(tmp_path, {**VM_SYSCTLS, "net/core/netdev_budget": None,
                               "net/core/rps_sock_flow_entries": "many\n"})
    hc, problems = read_host_config(root)
    assert "net.core.netdev_budget" not in hc.sysctls
    assert hc.rps_sock_flow_entries is None
    assert len(problems) == 2
    budget = next(p for p in problems if "netdev_budget" in p.message)
    assert "/proc/sys/net/core/netdev_budget" in budget.message and "\n" not in budget.message
    assert any("malformed" in p.message and "'many'" in p.message for p in problems)


def test_read_sysctls_subset(tmp_path):
    got, problems = read_sysctls(make_sys(tmp_path, VM_SYSCTLS), ("net.core.dev_weight",))
    assert (got, problems) == ({"net.core.dev_weight": "64"}, [])


# --- irqbalance on captured roots -------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_found_through_its_control_socket_without_scanning(tmp_path):
    add_proc(tmp_path, 1, "systemd")
    add_proc(tmp_path, 812, "irqbalance")
    (tmp_path / "run/irqbalance").mkdir(parents=True)
    (tmp_path / "run/irqbalance/irqbalance812.sock").write_text("")
    cache = IrqbalanceCache()
    assert cache.running(SysRoot(str(tmp_path))) is True
    assert cache.scans == 0


def test_stale_socket_of_a_reused_pid_is_not_believed(tmp_path):
    add_proc(tmp_path, 812, "bash")
    (tmp_path / "run/irqbalance").mkdir(parents=True)
    (tmp_path / "run/irqbalance/irqbalance812.sock").write_text("")
    cache = IrqbalanceCache()
    assert cache.running(SysRoot(str(tmp_path))) is False
    assert cache.scans == 1


def _scanned_once(tmp_path):  # type: ignore[no-untyped-def]
    """A host without irqbalance, its cache (5 s scans) after its first call."""
    root, clock = SysRoot(str(tmp_path)), Clock()
    add_proc(tmp_path, 1, "systemd")
    cache = IrqbalanceCache(interval=5.0, clock=clock)
    assert cache.running(root) is False and cache.scans == 1
    return root, clock, cache


def test_scan_runs_at_most_once_per_interval_and_at_once_when_it_stops(tmp_path):
    root, clock, cache = _scanned_once(tmp_path)
    # GIVEN irqbalance starts (no socket dir): it is not seen before the interval is up
    add_proc(tmp_path, 4242, "irqbalance")
    clock.t += 1
    assert cache.running(root) is False and cache.scans == 1
    clock.t += 4.5
    assert cache.running(root) is True and cache.scans == 2
    # WHILE it runs only its own comm is read, no scan
    clock.t += 60
    assert cache.running(root) is True and cache.scans == 2
    # WHEN it stops, the next call looks again right away
    shutil.rmtree(tmp_path / "proc/4242")
    assert cache.running(root) is False and cache.scans == 3
    # AND a pid reused by another program does not count
    add_proc(tmp_path, 4242, "sleep")
    clock.t += 10
    assert cache.running(root) is False


def test_root_without_proc(tmp_path):
    assert irqbalance_running(SysRoot(str(tmp_path))) is False


# --- the live kernel --------------------------------------------------------------------


@pytest.mark.live
def test_live_values_match_sysctl():
    if not shutil.which("sysctl"):
        pytest.skip("no sysctl(8)")
    hc, problems = read_host_config(LIVE)
    assert problems == []
    names = [*hc.sysctls, "net.core.default_qdisc"]
    out = subprocess.run(["sysctl", "-n", *names], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    expect = dict(zip(names, (normalize(v) for v in out)))
    assert hc.default_qdisc == expect.pop("net.core.default_qdisc")
    assert dict(hc.sysctls) == expect
    assert {"net.core.netdev_budget", "net.core.netdev_max_backlog"} <= set(hc.sysctls)


@pytest.mark.live
def test_live_flow_limit_bitmap_written_reads_back():
    # flow limits only act on a CPU whose backlog is over half full: harmless to flip
    path = Path("/proc/sys/net/core/flow_limit_cpu_bitmap")
    if not path.exists() or os.geteuid() != 0:
        pytest.skip("needs root and net.core.flow_limit_cpu_bitmap")
    before = path.read_text().strip()
    new = "1" if int(before.replace(",", ""), 16) != 1 else "2"
    try:
        path.write_text(new + "\n")
        hc, problems = read_host_config(LIVE)
        assert problems == []
        got = hc.sysctls["net.core.flow_limit_cpu_bitmap"]
        assert int(got.replace(",", ""), 16) == int(new, 16)
        assert got == normalize(path.read_text())
    finally:
        path.write_text(before + "\n")
    assert read_host_config(LIVE)[0].sysctls["net.core.flow_limit_cpu_bitmap"] == before


def _wait_for_exec(pid: int, comm: str) -> None:
    """Popen may return before the child has exec'd (its comm is still python's)."""
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/comm").read_text().strip() != comm:
        assert time.monotonic() < deadline, f"pid {pid} never became {comm}"
        time.sleep(0.01)


@pytest.mark.live
def test_live_dummy_irqbalance_is_detected_then_not_after_kill(tmp_path):
    if scan_proc(LIVE) is not None:
        pytest.skip("a real irqbalance runs here; the 'not detected' half cannot hold")
    fake = tmp_path / "irqbalance"
    shutil.copy2("/bin/sleep", fake)  # comm is the basename of what was exec'd
    clock = Clock()
    cache = IrqbalanceCache(interval=5.0, clock=clock)
    assert cache.running(LIVE) is False
    proc = subprocess.Popen([str(fake), "600"])
    try:
        _wait_for_exec(proc.pid, "irqbalance")
        assert irqbalance_running(LIVE) is True  # fresh scan, no cache
        assert cache.running(LIVE) is False  # the cache scanned just now: next in 5 s
        clock.t += 5
        assert cache.running(LIVE) is True
        scans = cache.scans
        assert cache.running(LIVE) is True and cache.scans == scans  # pid re-check only
    finally:
        proc.kill()
        proc.wait()
    assert cache.running(LIVE) is False
    assert irqbalance_running(LIVE) is False


def test_a_scan_reads_only_new_processes_comm_and_all_of_them_every_full_interval(tmp_path):
    root, clock = SysRoot(str(tmp_path)), Clock()
    for pid in range(1, 41):
        add_proc(tmp_path, pid, "worker")
    cache = IrqbalanceCache(interval=5.0, clock=clock, full_interval=60.0)
    assert cache.running(root) is False and cache.comms_read == 40  # the first scan: all
    add_proc(tmp_path, 41, "worker")
    clock.t += 5
    assert cache.running(root) is False and cache.comms_read == 1  # then the new ones only
    add_proc(tmp_path, 77, "irqbalance")
    clock.t += 5
    assert cache.running(root) is True and cache.comms_read == 1  # a new irqbalance: found
    shutil.rmtree(tmp_path / "proc/77")
    assert cache.running(root) is False and cache.comms_read == 41  # it stopped: all again
    # GIVEN a pid already looked at becomes irqbalance (an exec): found at the full scan
    (tmp_path / "proc/7/comm").write_text("irqbalance\n")
    clock.t += 5
    assert cache.running(root) is False and cache.comms_read == 0
    clock.t += 55
    assert cache.running(root) is True


def test_socket_directories_are_listed_each_call_only_while_one_is_there(tmp_path):
    root, clock, cache = _scanned_once(tmp_path)
    # GIVEN irqbalance starts with its socket while no socket directory was there: it is
    # looked for at the scan's pace, and then found through the socket, without a scan
    add_proc(tmp_path, 812, "irqbalance")
    (tmp_path / "run/irqbalance").mkdir(parents=True)
    (tmp_path / "run/irqbalance/irqbalance812.sock").write_text("")
    clock.t += 1
    assert cache.running(root) is False
    clock.t += 4.5
    assert cache.running(root) is True and cache.scans == 1
    # WHEN it stops, the directory stays: the next irqbalance is found at once through it
    shutil.rmtree(tmp_path / "proc/812")
    (tmp_path / "run/irqbalance/irqbalance812.sock").unlink()
    assert cache.running(root) is False and cache.scans == 2
    add_proc(tmp_path, 900, "irqbalance")
    (tmp_path / "run/irqbalance/irqbalance900.sock").write_text("")
    clock.t += 1
    assert cache.running(root) is True and cache.scans == 2
