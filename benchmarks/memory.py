"""What the live view's memory does over time: RSS printed every minute, per case.

The cases (issue 29), each nettop's live view alone in a 120x40 pseudo-terminal as
benchmarks/tui_cost.py runs it:
  - host64:  a generated 64-CPU tree with ~1,500 IRQs and 2x16 queues, `-i 1`
  - host256: a generated 256-CPU tree with ~1,500 IRQs and 2x64 queues, `-i 1`
  - host1024: the generated 1,024-CPU / 16,384-IRQ / 4x128-queue / 4-node tree of
    benchmarks/record_cost.py, `-i 1`
  - record1024: `nettop record` (headless) on that same tree, `-i 1`
  - live:    this host at `-i 0.1`
  - churn:   the live view at `-i 0.1` in a network namespace of its own where 100 veth
    pairs (4+4 queues each) are made, kept 3 s and deleted, round after round, the names
    coming back every ten rounds (a container host's churn; a VM host's vnet3 made again)
The 64/256-CPU trees' counters advance every second (`tests/treegen.py --advance 1`, not
counted); the 1,024-CPU tree's are advanced by record_cost's `Advancer` (every CPU's
stat/softnet/softirq lines, every NIC queue IRQ's per_cpu_count, the NICs' statistics),
since regenerating it whole takes longer than a second. So rates, charts and history fill
as on a busy server.

Targets (issue 29): the 64/256-CPU trees <= 150 MB, the 1,024-CPU tree <= 400 MB, the
recorder at 1,024 CPUs <= 200 MB, the live host <= 100 MB; flat after the first 5 minutes
(we print the growth from minute 5 to the end; "flat" is within a few MB). Each line also
gives the CPU % the process used over that minute (user + system of nettop and its
children over wall time, as tui_cost.py counts it), and the report the whole run's after
the warm-up: the live view at `-i 1` <= 3 % of one CPU on the 256-CPU tree, <= 6 % on the
1,024-CPU one. `--minutes 2 --case host1024` is a short run of the latter; the exit
status stays about memory.

    sudo .venv/bin/python benchmarks/memory.py [--minutes 60] [--case host64 ...]
    sudo .venv/bin/python benchmarks/memory.py --minutes 3        # smoke
    sudo .venv/bin/python benchmarks/memory.py --src /tmp/old     # another checkout's nettop
    .venv/bin/python benchmarks/memory.py --minutes 2 --case host1024 --src . --against /tmp/base

--parallel runs the cases at once (a shorter wall time on a machine with cores to spare;
RSS does not depend on it, but a loaded machine draws fewer frames).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))
from tui_cost import COLS, ROWS, PtyReader, cpu_seconds  # noqa: E402

TREES = {"host64": (64, 1500, 16), "host256": (256, 1500, 64)}  # cpus, irqs, queues per NIC
BIG = ("host1024", "record1024")  # the 1,024-CPU tree (record_cost.SIZES[1024]), shared
CASES = [*TREES, *BIG, "live", "churn"]
INTERVAL = {"host64": "1", "host256": "1", "host1024": "1", "record1024": "1", "live": "0.1", "churn": "0.1"}
TARGET_MB = {"host64": 150.0, "host256": 150.0, "host1024": 400.0, "record1024": 200.0, "live": 100.0,
             "churn": 100.0}
CPU_TARGET = {"host256": 3.0, "host1024": 6.0}  # % of one CPU, the live view at `-i 1` (issue 29)
FLAT_AFTER_MIN = 5


@dataclass
class Trace:
    case: str
    label: str = ""  # the case, and which checkout when two run side by side
    rss_mb: list[float] = field(default_factory=list)  # at minute 0 (after warm-up), 1, 2, ...
    cpu_pct: list[float] = field(default_factory=list)  # over each minute up to minute 1, 2, ...
    cpu_s: float = 0.0  # user + system seconds from minute 0 to the last line
    wall_s: float = 0.0
    error: str | None = None

    def overall_cpu(self) -> float | None:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else None


def nettop_argv(src: Path | None) -> tuple[list[str], dict[str, str]]:
    """How to start nettop: this venv's, or the package in `src` (a checkout of another commit)."""
    if src is None:
        venv = Path(sys.executable).with_name("nettop")
        return ([str(venv)] if venv.exists() else [sys.executable, "-m", "nettop.cli"]), {}
    return [sys.executable, "-m", "nettop.cli"], {"PYTHONPATH": str(src)}


def watch(trace: Trace, argv: list[str], env_extra: dict[str, str], minutes: int, every: float,
          warmup: float, out: threading.Lock) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS),
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **env_extra}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=env_extra.get("PYTHONPATH"),
                            start_new_session=True, close_fds=True)
    CHILDREN.append(proc)
    os.close(slave)
    PtyReader(master).start()
    ps = psutil.Process(proc.pid)
    try:
        time.sleep(warmup)
        t0 = time.monotonic()
        cpu0 = cpu_prev = cpu_seconds(ps)  # start-up imports and the first frames are not counted
        t_prev = t0
        for m in range(int(minutes * 60 / every) + 1):
            time.sleep(max(0.0, t0 + m * every - time.monotonic()))
            if proc.poll() is not None:
                trace.error = f"exited with status {proc.returncode} at minute {m * every / 60:.1f}"
                return
            trace.rss_mb.append(ps.memory_info().rss / 1e6)
            now, cpu = time.monotonic(), cpu_seconds(ps)
            line = f"{trace.label or trace.case:8} min {m * every / 60:5.1f}  RSS {trace.rss_mb[-1]:7.1f} MB"
            if m:
                trace.cpu_pct.append(100.0 * (cpu - cpu_prev) / (now - t_prev))
                trace.cpu_s, trace.wall_s = cpu - cpu0, now - t0
                line += f"  CPU {trace.cpu_pct[-1]:5.1f} %"
            cpu_prev, t_prev = cpu, now
            with out:
                print(line, flush=True)
    finally:
        try:
            os.write(master, b"q")
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)


class BigTree:
    """The 1,024-CPU tree, generated once and advanced every second by one thread for all
    the cases that read it (the generator's cost is not nettop's)."""

    def __init__(self, tmp: Path) -> None:
        from record_cost import SIZES, Advancer
        from treegen import generate_tree

        from nettop.collectors.host import HostReader
        from nettop.kernel.sysroot import SysRoot

        self.dest = tmp / "tree1024"
        generate_tree(self.dest, **SIZES[1024])  # type: ignore[arg-type]
        reader = HostReader(SysRoot(str(self.dest)))
        try:
            reader.read()
            paths = list(reader._irq_sysfs._paths.values())  # the IRQs it counts (as record_cost)
        finally:
            reader.close()
        # whole files renamed over (not rewritten in place, as record_cost's own tree is):
        # the views read from other processes, and a file rewritten in place can be read
        # torn there, which a kernel's never is; a torn read sends the reader to the
        # 185 MB /proc/interrupts, and the figures would be that fallback's
        self.advancer = Advancer(self.dest, paths, in_place=False)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        k = 0
        next_t = time.monotonic()
        while not self.stop.is_set():
            k += 1
            self.advancer.step(k)
            next_t += 1.0
            self.stop.wait(max(0.0, next_t - time.monotonic()))

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


class Churn:
    """A namespace of its own (removed at the end, with its veths) whose interfaces come
    and go: rounds of PAIRS veth pairs made, kept 3 s and deleted; round r's names are
    round r - 10's. Through `ip -batch` files (argv lists, no shell)."""

    PAIRS = 100

    def __init__(self, label: str) -> None:
        self.ns = f"ntbench-churn{os.getpid()}{label.replace(' ', '')}"
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        NAMESPACES.append(self.ns)
        subprocess.run(["ip", "-n", self.ns, "link", "set", "lo", "up"], check=True)
        self.stop = threading.Event()
        self.rounds = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _batch(self, lines: list[str]) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".ip") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            subprocess.run(["ip", "-n", self.ns, "-force", "-batch", f.name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

    def _run(self) -> None:
        while not self.stop.is_set():
            r = self.rounds % 10
            names = [f"ch{r}a{i}" for i in range(self.PAIRS)]
            self._batch([f"link add ch{r}a{i} numtxqueues 4 numrxqueues 4 type veth peer name ch{r}b{i} "
                         "numtxqueues 4 numrxqueues 4" for i in range(self.PAIRS)]
                        + [f"link set {n} up" for n in names])
            self.stop.wait(3.0)
            self._batch([f"link del {n}" for n in names])
            self.rounds += 1
            self.stop.wait(1.0)

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        subprocess.run(["ip", "netns", "del", self.ns], check=False)


def run_case(case: str, tmp: Path, src: Path | None, minutes: int, every: float, warmup: float,
             out: threading.Lock, big: BigTree | None = None, label: str = "") -> Trace:
    argv, env = nettop_argv(src)
    argv = [*argv, "-i", INTERVAL[case]]
    trace = Trace(case, label or case)
    if case == "live":
        watch(trace, argv, env, minutes, every, warmup, out)
        return trace
    if case == "churn":
        churn = Churn(label)
        try:
            churn.start()
            watch(trace, ["ip", "netns", "exec", churn.ns, *argv], env, minutes, every, warmup, out)
        finally:
            churn.close()
        with out:
            print(f"{trace.label:8} {churn.rounds} rounds of {Churn.PAIRS} veth pairs made and deleted", flush=True)
        return trace
    if case in BIG:
        assert big is not None
        if case == "record1024":
            argv = [*argv, "--record", str(tmp / f"rec1024{len(label)}.nettop")]
        watch(trace, [*argv, "--root", str(big.dest)], env, minutes, every, warmup, out)
        return trace
    from treegen import generate_tree

    cpus, irqs, queues = TREES[case]
    dest = tmp / (label or case).replace(" ", "_")  # each run its own tree and generator
    generate_tree(dest, cpus=cpus, irqs=irqs, queues=queues)
    gen = subprocess.Popen([sys.executable, str(HERE.parent / "tests" / "treegen.py"), str(dest), "--cpus", str(cpus),
                            "--irqs", str(irqs), "--queues", str(queues), "--advance", "1"])
    CHILDREN.append(gen)
    try:
        watch(trace, [*argv, "--root", str(dest)], env, minutes, every, warmup, out)
    finally:
        gen.terminate()
        gen.wait()
    return trace


def report(t: Trace, every: float) -> str:
    if not t.rss_mb:
        return f"{t.label or t.case:8} no figures ({t.error})"
    peak = max(t.rss_mb)
    flat_from = min(len(t.rss_mb) - 1, int(FLAT_AFTER_MIN * 60 / every))
    growth = t.rss_mb[-1] - t.rss_mb[flat_from]
    span = (len(t.rss_mb) - 1 - flat_from) * every / 60
    verdict = "ok" if peak <= TARGET_MB[t.case] else "OVER"
    line = (f"{t.label or t.case:8} start {t.rss_mb[0]:6.1f} MB  peak {peak:6.1f} MB  end {t.rss_mb[-1]:6.1f} MB  "
            f"growth {growth:+5.1f} MB over the last {span:.0f} min  (target <= {TARGET_MB[t.case]:.0f} MB: {verdict})")
    cpu = t.overall_cpu()
    if cpu is not None:
        target = CPU_TARGET.get(t.case)
        line += f"\n{'':8} CPU {cpu:.2f} % of one CPU over {t.wall_s / 60:.1f} min" + (
            f"  (target <= {target:g} %: {'ok' if cpu <= target else 'OVER'})" if target is not None else "")
    return line + (f"  [{t.error}]" if t.error else "")


CHILDREN: list[subprocess.Popen] = []  # every nettop and tree generator started
NAMESPACES: list[str] = []  # the churn cases' namespaces, removed (with their veths) however the run ends


def _end_children(signum: int, _frame: object) -> None:
    """Killed (SIGTERM, Ctrl-C): take the nettops and tree generators along. Each nettop
    leads its own session, so a killed benchmark left them running for good (and a tree
    generator using a quarter of a CPU)."""
    for p in CHILDREN:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                p.kill()
    for ns in NAMESPACES:
        subprocess.run(["ip", "netns", "del", ns], check=False, stderr=subprocess.DEVNULL)
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _end_children)
    signal.signal(signal.SIGINT, _end_children)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between RSS lines (default: a minute)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--case", action="append", choices=CASES, help="run only these (default: all)")
    ap.add_argument("--src", type=Path, help="run the nettop package in this directory instead of this venv's")
    ap.add_argument("--parallel", action="store_true", help="run the cases at once")
    ap.add_argument("--against", type=Path, help="also run each case from this checkout (e.g. the base commit's "
                    "export), at the same time on the same tree, so both see the same machine load")
    args = ap.parse_args(argv)
    cases = args.case or CASES
    out = threading.Lock()
    traces: dict[str, Trace] = {}
    sources: list[tuple[str, Path | None]] = [("", args.src)]
    if args.against is not None:
        sources.append((" against", args.against))
    with tempfile.TemporaryDirectory() as tmp:
        big = BigTree(Path(tmp)) if set(cases) & set(BIG) else None

        def one(case: str) -> None:
            def each(suffix: str, src: Path | None) -> None:
                trace = run_case(case, Path(tmp), src, args.minutes, args.every, args.warmup, out, big,
                                 case + suffix)
                traces[case + suffix] = trace
            runs = [threading.Thread(target=each, args=s) for s in sources]
            for th in runs:
                th.start()
            for th in runs:
                th.join()
        if args.parallel:
            threads = [threading.Thread(target=one, args=(c,)) for c in cases]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        else:
            for c in cases:
                one(c)
        if big is not None:
            big.close()
    for suffix, src in sources:
        print(f"\nnettop from {src or 'this venv'}, {args.minutes} min, RSS every {args.every:g} s:")
        for c in cases:
            print(report(traces[c + suffix], args.every))
    return 0 if all(t.rss_mb and max(t.rss_mb) <= TARGET_MB[t.case] for t in traces.values()) else 1

if __name__ == "__main__":
    sys.exit(main())
