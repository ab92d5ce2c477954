"""End to end: `nettop` in a real tmux terminal on the live host while iperf3 runs over a
lab veth pair. We send keys like an operator and read the screen with capture-pane: the
veth's real throughput (cross-checked against its sysfs counters) and its queues must
be on screen, and the keys must do what the help says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.live]

TMUX = shutil.which("tmux")
SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def nettop_argv() -> list[str]:
    script = Path(sys.executable).with_name("nettop")
    return [str(script)] if script.exists() else [sys.executable, "-m", "nettop.cli"]


def si(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)([kMGT]?)", text)
    if m is None:
        raise ValueError(f"not a number on screen: {text!r}")
    return float(m.group(1)) * SI[m.group(2)]


class Tmux:
    """One tmux server of our own (its own socket), so nothing else is touched."""

    def __init__(self) -> None:
        self.socket = f"nettop-test-{os.getpid()}"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # the server inherits this environment: without COLUMNS/LINES (set under pytest),
        # which would override the real terminal size in the programs it starts
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, env=env)

    def start(self, argv: list[str], width: int, height: int) -> None:
        # a first session keeps the server up, so remain-on-exit can be set before nettop
        # starts: if it dies, its last words stay on the screen for the failure message
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "keep", "-x", "20", "-y", "5")
        self.run("set-option", "-g", "remain-on-exit", "on")
        self.run("set-option", "-g", "default-size", f"{width}x{height}")
        self.run("new-session", "-d", "-s", "nettop", "-x", str(width), "-y", str(height),
                 "-e", "TERM=xterm-256color", "-c", str(Path(__file__).resolve().parent.parent), *argv)
        size = self.run("display-message", "-p", "-t", "nettop", "#{window_width}x#{window_height}").stdout
        assert size.strip() == f"{width}x{height}", size

    def keys(self, *keys: str) -> None:
        """tmux key names: "Space", "Escape", or the character itself ("+", "?")."""
        for k in keys:
            self.run("send-keys", "-t", "nettop", k)
            time.sleep(0.3)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "nettop", check=False).stdout

    def alive(self) -> bool:
        out = self.run("display-message", "-p", "-t", "nettop", "#{pane_dead}", check=False)
        return out.returncode == 0 and out.stdout.strip() == "0"

    def wait(self, ok: Callable[[str], bool], timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if ok(screen):
                return screen
            time.sleep(0.25)
        size = self.run("display-message", "-p", "-t", "nettop", "#{pane_width}x#{pane_height}", check=False)
        raise AssertionError(f"screen never matched within {timeout:g} s; pane {size.stdout.strip()}, "
                             f"last screen:\n{screen}")

    def kill(self) -> None:
        self.run("kill-server", check=False)


@pytest.fixture
def tmux():
    if TMUX is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    if os.geteuid() != 0:
        pytest.skip("the live screen test drives a veth lab, which needs root")
    t = Tmux()
    yield t
    t.kill()


def iface_row(screen: str, ifname: str) -> tuple[float, float] | None:
    """rx and tx bit/s from the interface table row of `ifname`."""
    m = re.search(rf"(?<!\S){re.escape(ifname)}\s+([0-9.]+[kMGT]?)\s+([0-9.]+[kMGT]?)\s", screen)
    return (si(m.group(1)), si(m.group(2))) if m else None


def sysfs_bits_per_s(ifname: str, counter: str, seconds: float = 1.0) -> float:
    path = f"/sys/class/net/{ifname}/statistics/{counter}"
    with open(path) as f:
        a = int(f.read())
    time.sleep(seconds)
    with open(path) as f:
        b = int(f.read())
    return 8 * (b - a) / seconds


def with_exit_status(argv: list[str], path: Path) -> list[str]:
    """argv run by a tiny Python parent that writes the child's exit status to `path`."""
    code = "import subprocess, sys; rc = subprocess.call(sys.argv[2:]); open(sys.argv[1], 'w').write(str(rc))"
    return [sys.executable, "-c", code, str(path), *argv]


def test_live_screen_shows_veth_throughput_and_queues_and_obeys_keys(veth_lab, tmux, tmp_path):
    host_if = veth_lab.host_if
    veth_lab.iperf3_server()
    veth_lab.iperf3_client(60, extra=["-b", "200M"])  # root namespace -> peer: host_if transmits
    # eth0 (virtio, real IRQs) and the lab veth: other tests' interfaces may come and go
    status = tmp_path / "status"
    argv = [*nettop_argv(), "-i", "1", "--iface", "eth0", "--iface", host_if]
    tmux.start(with_exit_status(argv, status), 120, 40)

    def busy(screen: str) -> bool:
        row = iface_row(screen, host_if)
        return row is not None and row[1] > 1e6

    screen = tmux.wait(busy, timeout=30)
    shown_tx = iface_row(screen, host_if)[1]
    kernel_tx = sysfs_bits_per_s(host_if, "tx_bytes")
    assert kernel_tx / 3 < shown_tx < kernel_tx * 3, (shown_tx, kernel_tx)
    assert 100e6 < shown_tx < 400e6  # iperf3 was asked for 200 Mbit/s
    for q in range(4):  # the lab veth has 4 rx and 4 tx queues
        assert f"{host_if} rx-{q}" in screen and f"{host_if} tx-{q}" in screen, screen
    assert "nettop live" in screen and "every 1s" in screen and "nettop CPU" in screen
    assert re.search(r"eth0 rx-0\s+\d+\s", screen)  # virtio's rx queue with its IRQ number

    tmux.keys("s")
    tmux.wait(lambda s: "sort: irq/s" in s)
    tmux.keys("+")
    tmux.wait(lambda s: "every 2s" in s)
    tmux.keys("-")
    tmux.wait(lambda s: "every 1s" in s)
    tmux.keys("Space")
    tmux.wait(lambda s: "nettop PAUSED" in s)
    tmux.keys("p")
    tmux.wait(lambda s: "nettop live" in s)
    tmux.keys("i")
    tmux.wait(lambda s: "Interfaces: space toggles" in s and host_if in s)
    tmux.keys("Escape")
    tmux.wait(lambda s: "Interfaces: space toggles" not in s)
    tmux.keys("3", "z")
    zoomed = tmux.wait(lambda s: re.search(r" now\s*$", s, re.M) is not None and f"━━ {host_if} " in s
                       and "rps/s" not in s and " queue " not in s)
    assert busy(zoomed)
    tmux.keys("z")
    tmux.wait(lambda s: " queue " in s)
    tmux.keys("?")
    tmux.wait(lambda s: "this help: every key" in s)
    tmux.keys("Escape")
    tmux.wait(lambda s: "this help: every key" not in s)
    tmux.keys("t")
    tmux.keys("q")
    deadline = time.monotonic() + 10
    while not status.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status.exists() and status.read_text() == "0", tmux.screen()


def test_as_an_unprivileged_user_the_screen_is_read_only_with_a_notice(tmux, tmp_path):
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to drop to an unprivileged user")
    argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=/tmp",
            sys.executable, "-m", "nettop.cli", "-i", "1"]
    tmux.start(argv, 120, 40)
    screen = tmux.wait(lambda s: "nettop read-only" in s and "eth0 rx-0" in s)
    assert re.search(r"^ not root: .*need root", screen, re.M), screen
    assert re.search(r"eth0 rx-0\s+\d+\s", screen)  # /proc/interrupts is world-readable
    tmux.keys("q")
    tmux.wait(lambda s: "Pane is dead" in s or "nettop read-only" not in s, timeout=10)


def test_at_80x24_the_first_screen_shows_throughput_latency_and_the_cpus(tmux, tmp_path):
    """An SSH-sized terminal with three 4-queue lab veths present (one moving traffic)
    and a latency probe to a lab namespace: eth0's throughput (it carries the default
    route, so it leads), an RTT figure and the CPU heat strip are all on the first screen."""
    import contextlib

    from lab import can_build_lab, veth_lab

    reason = can_build_lab()
    if reason:
        pytest.skip(reason)
    with contextlib.ExitStack() as stack:
        labs = [stack.enter_context(veth_lab()) for _ in range(3)]
        busy = labs[1]
        busy.iperf3_server()
        busy.iperf3_client(60, extra=["-b", "100M"])
        status = tmp_path / "status"
        argv = [*nettop_argv(), "-i", "1", "--ping", labs[0].peer_ip]
        tmux.start(with_exit_status(argv, status), 80, 24)
        rtt = re.compile(rf"^ {re.escape(labs[0].peer_ip)}\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s", re.M)

        def complete(screen: str) -> bool:
            row = iface_row(screen, busy.host_if)
            return (re.search(r"^ eth0 ●\s+[0-9.]+[kMGT]?\s+[0-9.]+[kMGT]?\s", screen, re.M) is not None
                    and rtt.search(screen) is not None and row is not None and row[1] > 1e6
                    and re.search(r"^ \d+▕[▁▂▃▄▅▆▇█·]+▏\d+", screen, re.M) is not None)

        screen = tmux.wait(complete, timeout=40)
        lines = screen.splitlines()
        assert len(lines) <= 24 and all(len(x) <= 80 for x in lines)
        first_iface = next(x for x in lines if x.startswith(" ") and "●" in x)
        assert first_iface.startswith(" eth0 ●"), screen  # the default route's interface leads
        p50, p99, loss = (float(v) for v in rtt.search(screen).groups())
        assert 0 < p50 <= p99 < 50 and loss <= 100, screen
        for lab in labs:  # every lab veth is on screen: busy in a row, idle ones folded or listed
            assert lab.host_if in screen, screen
        assert "2 CPUs softirq" in screen and "4 latency" in screen and "5 qdisc" in screen
        shown_tx = iface_row(screen, busy.host_if)[1]
        kernel_tx = sysfs_bits_per_s(busy.host_if, "tx_bytes")
        assert kernel_tx / 3 < shown_tx < kernel_tx * 3, (shown_tx, kernel_tx)
        tmux.keys("3")  # the full throughput panel, one key away
        tmux.wait(lambda s: re.search(r" now\s*$", s, re.M) is not None and "rx bit/s" in s)
        tmux.keys("z")
        tmux.wait(lambda s: "2 CPUs softirq" in s)
        (tmp_path / "screen.txt").write_text(screen)
        tmux.keys("q")
        deadline = time.monotonic() + 10
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status.exists() and status.read_text() == "0", tmux.screen()
        print(screen)
