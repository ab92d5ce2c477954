"""What the live screen costs: nettop next to its peers, same terminal, same rate, one run.

Each program runs alone in a pseudo-terminal of 120x40 with TERM=xterm-256color, refreshing
once per second (`nettop -i 1`, `htop -d 10`, `glances -t 1`, bpytop and btop with
update_ms=1000 in a config of their own), for --seconds (default 60) after a warm-up that
is not counted (start-up imports are a one-off). We print the CPU % each process used
(user + system of the process and its children, over wall time) and the bytes per second
it wrote to the terminal; then nettop at 80x24 (the summary), and nettop on a generated
256-CPU / 4096-IRQ tree whose counters `tests/treegen.py --advance 1` rewrites every
second (so rates and the heatmap change each tick; the generator is not counted).

Targets: nettop's CPU <= 1/2 of glances' and <= 2x a Textual app that updates one label;
its bytes/s <= htop's; on the 256-CPU tree <= 3 % of one CPU.

The peers: htop and btop from Debian (`apt-get install htop btop`); glances and bpytop
from PyPI into a venv of their own, so nettop's venv stays as CI builds it:

    python3 -m venv benchmarks/.peers && benchmarks/.peers/bin/pip install glances bpytop
    (or: .venv/bin/python benchmarks/tui_cost.py --setup-peers)

    sudo .venv/bin/python benchmarks/tui_cost.py [--seconds 60] [--warmup 5]
    sudo .venv/bin/python benchmarks/tui_cost.py --seconds 20 --rounds 3 --no-peers --against /tmp/base

A peer that is not installed is skipped with the line that installs it.

nettop is the package of the checkout this script is in (`python -m nettop.cli` with that
directory first on PYTHONPATH), or of `--src DIR`: the venv's `nettop` script runs
whatever checkout the venv was installed from, which is not the one under test when
several worktrees share one venv. `--against DIR` (e.g. `git archive` of the base commit)
runs that checkout's nettop beside it: both, and the Textual floor, at the same time in
ptys of their own, so they see the same machine load; on the 256-CPU tree both read the
same advancing tree. `--rounds N` repeats the nettop and floor measurements and prints
the median of each (the machine is shared; one run's noise is not a result).
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
import tempfile
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import psutil

COLS, ROWS = 120, 40
HERE = Path(__file__).resolve().parent
PEERS_VENV = HERE / ".peers"


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


def measure(name: str, argv: list[str], seconds: float, warmup: float, size: tuple[int, int] = (COLS, ROWS),
            env_extra: dict[str, str] | None = None, cwd: Path | None = None) -> Cost:
    cols, rows = size
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows),
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **(env_extra or {})}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
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


@dataclass(frozen=True, slots=True)
class Job:
    """One program to measure: its label, argv, extra environment and terminal size."""

    name: str
    argv: list[str]
    env: dict[str, str]
    size: tuple[int, int] = (COLS, ROWS)
    cwd: Path | None = None  # `python -m` puts the working directory first on the import path


def measure_together(jobs: list[Job], seconds: float, warmup: float) -> dict[str, Cost]:
    """Measure every job at once, each in its own pty, over the same wall-clock window,
    so a comparison is not skewed by what else the shared machine did meanwhile."""
    results: dict[str, Cost] = {}
    errors: list[BaseException] = []

    def one(job: Job) -> None:
        try:
            results[job.name] = measure(job.name, job.argv, seconds, warmup, job.size, job.env, job.cwd)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(j,)) for j in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return results


def nettop_job(name: str, src: Path, interval: str = "1", extra: list[str] | None = None,
               size: tuple[int, int] = (COLS, ROWS)) -> Job:
    """nettop from the checkout `src` (its package first on the import path)."""
    argv = [sys.executable, "-m", "nettop.cli", "-i", interval, *(extra or [])]
    return Job(name, argv, {"PYTHONPATH": str(src)}, size, src)


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


def peer_home(tmp: Path) -> dict[str, str]:
    """A HOME whose bpytop and btop configs refresh once per second (their defaults are
    2 s), so every program draws at the same rate; the real ~/.config is not touched."""
    conf = tmp / ".config"
    (conf / "bpytop").mkdir(parents=True, exist_ok=True)
    (conf / "bpytop" / "bpytop.conf").write_text("update_ms=1000\nshow_init=False\n")
    (conf / "btop").mkdir(parents=True, exist_ok=True)
    (conf / "btop" / "btop.conf").write_text("update_ms = 1000\n")
    return {"HOME": str(tmp), "XDG_CONFIG_HOME": str(conf)}


def peers(home: dict[str, str]) -> list[tuple[str, list[str] | str, dict[str, str]]]:
    """(name, argv or the reason it is missing, environment) of each peer."""
    out: list[tuple[str, list[str] | str, dict[str, str]]] = []
    htop = shutil.which("htop")
    out.append(("htop", [htop, "-d", "10"] if htop else "apt-get install htop", {}))
    glances = PEERS_VENV / "bin" / "glances"
    out.append(("glances", [str(glances), "-t", "1", "--disable-check-update"] if glances.exists()
                else f"{PEERS_VENV}/bin/pip install glances (see --setup-peers)", home))
    bpytop = PEERS_VENV / "bin" / "bpytop"
    out.append(("bpytop", [str(bpytop)] if bpytop.exists()
                else f"{PEERS_VENV}/bin/pip install bpytop (see --setup-peers)", home))
    btop = shutil.which("btop")
    out.append(("btop", [btop, "--utf-force"] if btop else "apt-get install btop", home))
    return out


def setup_peers() -> None:
    subprocess.run(["python3", "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run([str(PEERS_VENV / "bin" / "pip"), "install", "glances", "bpytop"], check=True)


def tree_run(sources: list[tuple[str, Path]], seconds: float, warmup: float) -> dict[str, Cost]:
    """nettop from each checkout on one generated 256-CPU tree that advances every second."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from treegen import generate_tree

    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "host256"
        generate_tree(dest, cpus=256, irqs=4096, queues=64)
        gen = subprocess.Popen([sys.executable, str(HERE.parent / "tests" / "treegen.py"), str(dest),
                                "--cpus", "256", "--irqs", "4096", "--queues", "64", "--advance", "1"])
        try:
            return measure_together([nettop_job(f"nettop 256-CPU tree{suffix}", src, extra=["--root", str(dest)])
                                     for suffix, src in sources], seconds, warmup)
        finally:
            gen.terminate()
            gen.wait()


def median_cost(runs: list[Cost]) -> Cost:
    """One figure per program from several rounds: the median CPU and bytes/s."""
    return Cost(runs[0].name, sum(r.seconds for r in runs), median(r.cpu_pct for r in runs),
                median(r.bytes_per_s for r in runs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=1, help="repeat nettop's and the floor's runs; print medians")
    ap.add_argument("--setup-peers", action="store_true", help=f"make {PEERS_VENV} with glances and bpytop, then run")
    ap.add_argument("--no-peers", action="store_true", help="skip htop, glances, bpytop and btop")
    ap.add_argument("--no-tree", action="store_true", help="skip the 256-CPU tree run")
    ap.add_argument("--src", type=Path, default=HERE.parent,
                    help="the checkout whose nettop is measured (default: the one this script is in)")
    ap.add_argument("--against", type=Path, help="also run this checkout's nettop (e.g. the base commit's "
                    "export) at the same time, in every nettop case")
    args = ap.parse_args(argv)
    if args.setup_peers:
        setup_peers()
    sources: list[tuple[str, Path]] = [("", args.src.resolve())]
    if args.against is not None:
        sources.append((" against", args.against.resolve()))
    runs: dict[str, list[Cost]] = {}
    missing: list[str] = []

    def keep(costs: dict[str, Cost]) -> None:
        for key, cost in costs.items():
            runs.setdefault(key, []).append(cost)

    with tempfile.TemporaryDirectory() as tmp:
        home = peer_home(Path(tmp))
        for _ in range(args.rounds):
            keep(measure_together([*(nettop_job(f"nettop{sfx}", src) for sfx, src in sources),
                                   Job("textual", [sys.executable, str(HERE / "textual_floor.py")], {})],
                                  args.seconds, args.warmup))
            keep(measure_together([nettop_job(f"nettop 80x24{sfx}", src, size=(80, 24)) for sfx, src in sources],
                                  args.seconds, args.warmup))
            if not args.no_tree:
                keep(tree_run(sources, args.seconds, args.warmup))
        if not args.no_peers:
            for name, cmd, env in peers(home):
                if isinstance(cmd, str):
                    missing.append(f"{name}: not installed ({cmd})")
                    continue
                runs[name] = [measure(name, cmd, args.seconds, args.warmup, env_extra=env)]
    results = {key: median_cost(costs) for key, costs in runs.items()}
    print(f"terminal {COLS}x{ROWS}, refresh 1 Hz, {args.seconds:g} s measured after {args.warmup:g} s warm-up, "
          f"{args.rounds} round(s) (medians), {os.cpu_count()} CPUs")
    for sfx, src in sources:
        print(f"nettop{sfx}: {src}")
    notes = {"textual": "a Textual app updating one label per second (the framework's floor)",
             "nettop 80x24": "the summary screen, 80x24 pty",
             "nettop 256-CPU tree": "generated 256 CPUs / 4096 IRQs / 64 queues, counters advancing each second"}
    print("| program | CPU % | bytes/s | note |")
    print("|---|---|---|---|")
    for key, r in results.items():
        print(f"| {r.name} | {r.cpu_pct:.2f} | {r.bytes_per_s:.0f} | {notes.get(key.removesuffix(' against'), '')} |")
    if args.rounds > 1:
        for key, costs in runs.items():
            if len(costs) > 1:
                print(f"{key}: CPU % per round " + " ".join(f"{c.cpu_pct:.2f}" for c in costs))
    for line in missing:
        print(f"skipped {line}")
    sys.path.insert(0, str(args.src.resolve()))  # the sampler of the checkout under test
    ms = sampler_share()
    if ms is not None:
        print(f"of nettop's CPU, sampling alone (HostReader.read, median of 10) is {ms:.2f} ms per tick "
              f"= {ms / 10:.2f} % at 1 Hz; the rest is rates, drawing and Textual")
    f = results["textual"]

    def check(label: str, ok: bool, detail: str) -> None:
        print(f"{label}: {detail}: {'ok' if ok else 'OVER TARGET'}")

    for sfx, _ in sources:
        n = results["nettop" + sfx]
        print(f"-- nettop{sfx}")
        if "glances" in results:
            g = results["glances"]
            check("CPU <= 1/2 glances", n.cpu_pct <= g.cpu_pct / 2, f"{n.cpu_pct:.2f} vs {g.cpu_pct / 2:.2f}")
        check("CPU <= 2x Textual floor", n.cpu_pct <= 2 * f.cpu_pct,
              f"{n.cpu_pct:.2f} vs {2 * f.cpu_pct:.2f} ({n.cpu_pct / f.cpu_pct:.2f}x)")
        if "htop" in results:
            h = results["htop"]
            check("bytes/s <= htop", n.bytes_per_s <= h.bytes_per_s, f"{n.bytes_per_s:.0f} vs {h.bytes_per_s:.0f}")
        if "nettop 256-CPU tree" + sfx in results:
            t = results["nettop 256-CPU tree" + sfx]
            check("256-CPU tree <= 3% of one CPU", t.cpu_pct <= 3.0, f"{t.cpu_pct:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
