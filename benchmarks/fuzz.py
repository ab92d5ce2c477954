"""Fuzz every parser: ≥100,000 mutated inputs each, seeded from real captures.

    .venv/bin/python benchmarks/fuzz.py                     # 100,000 inputs per parser
    .venv/bin/python benchmarks/fuzz.py --inputs 20000 --targets interrupts softnet
    .venv/bin/python benchmarks/fuzz.py --list

Each parser runs in a child process with an address-space limit (memory that grows with
the numbers in an input ends as a MemoryError there, a crash, instead of swapping the
host) and a watchdog: an input that makes no progress for --hang-s seconds is a hang,
the child is killed and restarted after it. Prints per parser: inputs, crashes, hangs,
silent inconsistencies (a result an independent check finds wrong and no Problem
mentions) and flagged inputs (marked incomplete or inconsistent by a Problem, or refused
with the project's one-line error). Every crash, hang and silent input is written under
tests/data/fuzz-regressions/PARSER/ (unless --no-save), and tests/test_fuzz.py replays
them in CI. The inputs are a pure function of --seed, so a run can be repeated exactly.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzzing.engine import Stats, fuzz, make_input, save_regression  # noqa: E402
from fuzzing.targets import BY_NAME, TARGETS  # noqa: E402


def _worker(name: str, start: int, stop: int, seed: int, hang_s: float, save: bool,
            mem_mb: int, pos: "mp.sharedctypes.Synchronized[int]", out: "mp.Queue[Stats]") -> None:
    limit = mem_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    target = BY_NAME[name]

    def progress(i: int) -> None:
        pos.value = i

    out.put(fuzz(target, stop - start, seed, start, hang_s, save, progress))


def run_target(name: str, n: int, seed: int, hang_s: float, save: bool, mem_mb: int) -> Stats:
    """All n inputs of one parser, restarting the child after each hang."""
    ctx = mp.get_context("fork")
    total = Stats(name)
    start = 0
    while start < n:
        pos = ctx.Value("q", start - 1, lock=False)
        q: mp.Queue[Stats] = ctx.Queue()
        p = ctx.Process(target=_worker, args=(name, start, n, seed, hang_s, save, mem_mb, pos, q))
        p.start()
        last, since = pos.value, time.monotonic()
        result: Stats | None = None
        while True:
            try:
                result = q.get(timeout=0.5)
                break
            except Exception:  # queue.Empty: still running
                pass
            if not p.is_alive():
                break
            if pos.value != last:
                last, since = pos.value, time.monotonic()
            elif time.monotonic() - since > hang_s + 1.0:
                p.kill()
                break
        p.join(5)
        if result is not None:
            total.add(result)
            break
        # killed (hang) or died (e.g. a fatal signal): input `pos` is the culprit
        bad = max(pos.value, start)
        total.inputs += bad - start + 1
        died = p.exitcode not in (None, -9)
        if died:
            total.crashes += 1
            total.kinds.setdefault(f"child died (exit {p.exitcode})", f"input {bad}")
        else:
            total.hangs += 1
            total.kinds.setdefault(f"hang > {hang_s:.0f} s", f"input {bad}")
        if save and total.hangs + total.crashes <= 5:  # a few of each parser are enough
            save_regression(name, make_input(BY_NAME[name], seed, bad),
                            f"{'child died' if died else 'hang'} (seed {seed}, input {bad})")
        start = bad + 1
    return total


def _preload() -> None:
    """Import what the targets use before any child is forked, so every parser of one run
    is fuzzed against the same code even if the tree is edited meanwhile."""
    import importlib
    import pkgutil

    import nettop

    for m in pkgutil.walk_packages(nettop.__path__, "nettop."):
        if m.name.startswith(("nettop.tui", "nettop.ebpf.program", "nettop.ebpf.probes")):
            continue
        try:
            importlib.import_module(m.name)
        except Exception:  # noqa: BLE001 - an optional module (bcc, pyroute2) may be missing
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=100_000, help="inputs per parser (default 100000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--targets", nargs="*", default=None, help="parsers to run (default: all)")
    ap.add_argument("--jobs", type=int, default=2, help="parsers fuzzed at the same time")
    ap.add_argument("--hang-s", type=float, default=5.0, help="seconds without progress that make a hang")
    ap.add_argument("--mem-mb", type=int, default=2048, help="address-space limit of each child")
    ap.add_argument("--no-save", action="store_true", help="do not write regression inputs")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for t in TARGETS:
            print(f"{t.name:22} {t.group}")
        return 0
    names = args.targets or [t.name for t in TARGETS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        print(f"fuzz.py: no parser named {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    _preload()
    t0 = time.monotonic()
    results: dict[str, tuple[Stats, float]] = {}
    # Threads only wait on the children; each parser runs in its own process.
    with ThreadPoolExecutor(args.jobs) as pool:
        pending = {n: pool.submit(_timed, n, args.inputs, args.seed, args.hang_s,
                                  not args.no_save, args.mem_mb) for n in names}
        for n, res in pending.items():
            results[n] = res.result()
            st, dt = results[n]
            print(f"  done {n:22} {st.inputs:>8,} inputs in {dt:6.1f} s", file=sys.stderr, flush=True)
    print(f"\nseed {args.seed}, {args.inputs:,} inputs per parser, hang = no progress for "
          f"{args.hang_s:g} s, {args.mem_mb} MB address space per child, {time.monotonic() - t0:.0f} s\n")
    print("| parser | group | inputs | crashes | hangs | silent inconsistencies | flagged (Problem or one-line error) | slowest input |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    tot = Stats("total")
    for n in names:
        st, _ = results[n]
        tot.add(st)
        print(f"| {n} | {BY_NAME[n].group} | {st.inputs:,} | {st.crashes} | {st.hangs} | {st.silent} | "
              f"{st.flagged:,} | {st.slowest_s * 1000:.0f} ms |")
    print(f"| **total** | | {tot.inputs:,} | {tot.crashes} | {tot.hangs} | {tot.silent} | {tot.flagged:,} | "
          f"{tot.slowest_s * 1000:.0f} ms |")
    kinds = [(n, k, v) for n in names for k, v in results[n][0].kinds.items()]
    if kinds:
        print("\nfindings (first input of each kind; inputs kept under tests/data/fuzz-regressions/):")
        for n, k, v in kinds:
            print(f"  {n}: {k}: {v}")
    return 1 if tot.crashes or tot.hangs or tot.silent else 0


def _timed(name: str, n: int, seed: int, hang_s: float, save: bool, mem_mb: int) -> tuple[Stats, float]:
    t = time.monotonic()
    return run_target(name, n, seed, hang_s, save, mem_mb), time.monotonic() - t


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
