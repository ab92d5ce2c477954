"""What the live screen costs: nettop's full-screen app next to htop, same terminal, same rate.

Each program runs alone in a pseudo-terminal of 120x40 with TERM=xterm-256color, refreshing
once per second (`nettop -i 1`, `htop -d 10`), for --seconds (default 60) after a warm-up
that is not counted (start-up imports are a one-off). We print the CPU % each process
used (user + system of the process and its children, over wall time) and the bytes per
second it wrote to the terminal. Target: nettop <= htop on both.

    sudo .venv/bin/python benchmarks/tui_cost.py [--seconds 60] [--warmup 5]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

COLS, ROWS = 120, 40


@dataclass(frozen=True, slots=True)
class Cost:
    name: str
    seconds: float
    cpu_pct: float
    bytes_per_s: float


class PtyReader(threading.Thread):
    """Drains the terminal side so the program never blocks on output; counts bytes."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.total = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.total += len(data)

    def count(self) -> int:
        with self.lock:
            return self.total


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system time of the process and every live child (htop has none, nettop's
    sampler is a thread, but a helper process would be counted too)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(name: str, argv: list[str], seconds: float, warmup: float) -> Cost:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    reader = PtyReader(master)
    reader.start()
    ps = psutil.Process(proc.pid)
    try:
        time.sleep(warmup)
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited during warm-up with status {proc.returncode}")
        c0, b0, t0 = cpu_seconds(ps), reader.count(), time.monotonic()
        time.sleep(seconds)
        c1, b1, t1 = cpu_seconds(ps), reader.count(), time.monotonic()
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited during the measurement with status {proc.returncode}")
    finally:
        try:
            os.write(master, b"q")
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    wall = t1 - t0
    return Cost(name, wall, 100.0 * (c1 - c0) / wall, (b1 - b0) / wall)


def sampler_share(reads: int = 10) -> float | None:
    """CPU ms of one HostReader.read() on this host (what nettop's sampler thread spends
    per tick, before any drawing), from the snapshots' own read_cpu_s."""
    try:
        from nettop.collectors.host import HostReader
    except ImportError:
        return None
    with HostReader() as reader:
        reader.read()  # first read opens sockets and caches device facts
        costs = []
        for _ in range(reads):
            costs.append(reader.read().read_cpu_s)
            time.sleep(0.1)
    costs.sort()
    return 1000 * costs[len(costs) // 2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    args = ap.parse_args(argv)
    venv_nettop = Path(sys.executable).with_name("nettop")
    nettop = [str(venv_nettop), "-i", "1"] if venv_nettop.exists() else [sys.executable, "-m", "nettop.cli", "-i", "1"]
    htop = shutil.which("htop")
    if htop is None:
        raise SystemExit("htop is not installed (apt-get install htop)")
    results = [measure("nettop", nettop, args.seconds, args.warmup),
               measure("htop", [htop, "-d", "10"], args.seconds, args.warmup)]
    floor = measure("textual", [sys.executable, str(Path(__file__).with_name("textual_floor.py"))],
                    args.seconds, args.warmup)
    print(f"terminal {COLS}x{ROWS}, refresh 1 Hz, {args.seconds:g} s measured after {args.warmup:g} s warm-up, "
          f"{os.cpu_count()} CPUs")
    print(f"{'program':<8} {'CPU %':>7} {'bytes/s':>9}")
    for r in results:
        print(f"{r.name:<8} {r.cpu_pct:>7.2f} {r.bytes_per_s:>9.0f}")
    print(f"{floor.name:<8} {floor.cpu_pct:>7.2f} {floor.bytes_per_s:>9.0f}   "
          "(reference: a Textual app that only updates one label per second)")
    ms = sampler_share()
    if ms is not None:
        print(f"of nettop's CPU, sampling alone (HostReader.read, median of 10) is {ms:.2f} ms per tick "
              f"= {ms / 10:.2f} % at 1 Hz; the rest is rates, drawing and Textual")
    n, h = results
    verdict = "ok" if n.cpu_pct <= h.cpu_pct and n.bytes_per_s <= h.bytes_per_s else "OVER TARGET"
    print(f"nettop/htop: CPU {n.cpu_pct / max(h.cpu_pct, 1e-9):.2f}x, bytes {n.bytes_per_s / max(h.bytes_per_s, 1e-9):.2f}x: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
