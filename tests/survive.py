"""Live view, `nettop record --dir` and `nettop serve` run together, watched from outside.

The "survive the host" tests (tests/test_survive_*.py) and benchmarks/soak.py start the
three front ends as separate processes, each with its own NETTOP_STATE_DIR and TMPDIR:
the live view in a tmux terminal of our own (Tmux from tests/test_tui_tmux.py), the
recorder and the exporter as plain subprocesses whose stdout and stderr go to files. What
can be read from outside is what a sysadmin would look at: the screen (does the header's
clock still move, is there a traceback), /metrics (HTTP 200), the recording (samples and
their times via `nettop export`), and /proc/PID/status and /proc/PID/fd of each process.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from test_tui_tmux import Tmux, nettop_argv

CLOCK = re.compile(r"(\d\d:\d\d:\d\d) UTC")
NAMES = ("live", "record", "serve")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident set size (VmRSS) of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass(frozen=True, slots=True)
class Usage:
    rss_mb: float
    fds: int


class Trio:
    """The three front ends at one interval, each in `workdir/<name>/`.

    `extra`: argv added to each (e.g. `--iface X`); none by default, so every interface
    the host has, and every one that comes and goes, is read by all three."""

    def __init__(self, workdir: Path, interval: float, tmux: Tmux, extra: list[str] | None = None) -> None:
        self.workdir, self.interval, self.tmux = workdir, interval, tmux
        self.extra = list(extra or [])
        self.port = free_port()
        self.rec_dir = workdir / "record" / "rec"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.pids: dict[str, int] = {}

    def _env(self, name: str) -> dict[str, str]:
        home = self.workdir / name
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update(NETTOP_STATE_DIR=str(home), TMPDIR=str(home / "tmp"))
        return env

    def _spawn(self, name: str, argv: list[str]) -> None:
        home = self.workdir / name
        env = self._env(name)
        with open(home / "stdout", "wb") as out, open(home / "stderr", "wb") as err:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=err, env=env,
                                                stdin=subprocess.DEVNULL)
        self.pids[name] = self.procs[name].pid

    def start(self, width: int = 120, height: int = 40) -> None:
        i = ["-i", f"{self.interval:g}", *self.extra]
        self._spawn("record", [*nettop_argv(), "record", "--dir", str(self.rec_dir), *i])
        self._spawn("serve", [*nettop_argv(), "serve", "--listen", f"127.0.0.1:{self.port}", *i])
        home = self.workdir / "live"
        self._env("live")
        # env(1) execs nettop, so the pane's pid is the live view's own pid
        self.tmux.start(["env", f"NETTOP_STATE_DIR={home}", f"TMPDIR={home / 'tmp'}",
                         *nettop_argv(), *i], width, height)
        self.tmux.wait(lambda s: CLOCK.search(s) is not None, timeout=60)
        pane = self.tmux.run("display-message", "-p", "-t", "nettop", "#{pane_pid}").stdout
        self.pids["live"] = int(pane.strip())
        deadline = time.monotonic() + 60
        while self.scrape() != 200:
            if time.monotonic() > deadline:
                raise AssertionError(f"serve never answered /metrics: {self.stderr('serve')}")
            time.sleep(0.3)
        while not list(self.rec_dir.glob("*.nettop")):
            if time.monotonic() > deadline:
                raise AssertionError(f"the recorder opened no file: {self.stderr('record')}")
            time.sleep(0.3)

    def stop(self) -> None:
        """SIGINT the recorder and the exporter (as Ctrl-C would), then kill what is left."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(2)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.tmux.kill()

    # what can be watched from outside

    def usage(self) -> dict[str, Usage]:
        return {n: Usage(rss_mb(pid), open_fds(pid)) for n, pid in self.pids.items()}

    def stderr(self, name: str) -> str:
        if name == "live":
            return self.tmux.screen()
        home = self.workdir / name
        return (home / "stdout").read_text(errors="replace") + (home / "stderr").read_text(errors="replace")

    def tracebacks(self) -> dict[str, str]:
        """Output of each process that shows a Python traceback (none expected)."""
        out = {n: self.stderr(n) for n in NAMES}
        return {n: text for n, text in out.items() if "Traceback" in text}

    def dead(self) -> list[str]:
        gone = [n for n, p in self.procs.items() if p.poll() is not None]
        return gone + ([] if self.tmux.alive() else ["live"])

    def clock(self) -> str | None:
        m = CLOCK.search(self.tmux.screen())
        return m.group(1) if m else None

    def redraws(self, timeout: float = 15.0) -> bool:
        """True when the header's clock changes within `timeout` (the screen is not stuck)."""
        first = self.clock()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.clock()
            if now is not None and now != first:
                return True
        return False

    def scrape(self) -> int:
        return self.metrics()[0]

    def metrics(self) -> tuple[int, str]:
        """(HTTP status, body) of serve's /metrics; (0, "") when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
                return int(r.status), r.read().decode()
        except OSError:
            return 0, ""

    def serve_sampler_errors(self) -> float:
        """serve's nettop_sampler_errors_total: samples it could not take."""
        m = re.search(r"^nettop_sampler_errors_total (\S+)$", self.metrics()[1], re.M)
        if m is None:
            raise AssertionError("no nettop_sampler_errors_total in /metrics")
        return float(m.group(1))

    def rec_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.rec_dir.glob("*.nettop"))

    def recording(self) -> dict:  # type: ignore[type-arg]
        """What was recorded so far (`nettop export DIR --format json`): samples, events."""
        out = subprocess.run([*nettop_argv(), "export", str(self.rec_dir), "--format", "json"],
                             capture_output=True, check=True)
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    def live_sampler_problems(self) -> list[str]:
        """The live view's "sampler: ..." problem lines on screen (a read that failed)."""
        return [ln for ln in self.tmux.screen().splitlines() if "sampler:" in ln]
