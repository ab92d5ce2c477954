"""Soak: the live view, `record --dir` and `serve` together at -i 0.1 for an hour.

A lab veth pair (tests/lab.py) carries iperf3 traffic the whole time. The three front
ends run as in tests/survive.py (the live view in a tmux terminal of our own). Every
`--every` seconds this prints each process's RSS (VmRSS, MB) and open file descriptors
(/proc/PID/fd); at the end, the growth of each since the end of the warm-up (default 5
minutes: Python's allocator settles) and over the second half of the run. Issue 28's
target: growth <= 5 MB after the first 5 minutes, and no descriptor leak. The live view
keeps 16 whole points and, for 3,600 samples, chart arrays and a digest a sample (~0.7 KB
a sample in all): at -i 0.1 that fills for 6 minutes (longer when a loaded host makes
the sampler skip ticks), ~2.5 MB, so its growth after 5 minutes includes the end of that
fill; the second half's figure has none. Exit status 1 when a process died or printed a
traceback, or a bound was missed.

Usage (root: the lab needs ip netns): .venv/bin/python benchmarks/soak.py [--minutes 60]
    [--every 60] [--warmup 5] [--interval 0.1] [--bound-mb 5] [--all-ifaces]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from lab import can_build_lab, veth_lab  # noqa: E402
from survive import NAMES, Trio, Usage  # noqa: E402
from test_tui_tmux import Tmux  # noqa: E402


def line(elapsed: float, usage: dict[str, Usage]) -> str:
    cells = "  ".join(f"{n} {u.rss_mb:7.1f} MB {u.fds:4d} fd" for n, u in usage.items())
    return f"{elapsed / 60:6.1f} min  {cells}"


def soak(minutes: float, every: float, warmup: float, interval: float, bound_mb: float,
         out: TextIO, all_ifaces: bool = False) -> int:
    reason = can_build_lab()
    if reason:
        print(f"soak: {reason}", file=sys.stderr)
        return 2
    failures: list[str] = []
    with veth_lab() as lab, tempfile.TemporaryDirectory(prefix="nettop-soak-") as tmp:
        lab.iperf3_server()
        lab.iperf3_client(int(minutes * 60) + 120, extra=["-b", "50M"])
        tmux = Tmux()
        # eth0 and the lab by default: other labs coming and going on a shared machine
        # would change what each sample holds, and so the figures
        extra = [] if all_ifaces else ["--iface", "eth0", "--iface", lab.host_if]
        trio = Trio(Path(tmp), interval, tmux, extra)
        try:
            trio.start()
            t0 = time.monotonic()
            print(f"soak: -i {interval:g} for {minutes:g} min, lab {lab.host_if} under iperf3 50 Mbit/s; "
                  f"pids {trio.pids}", file=out, flush=True)
            base: dict[str, Usage] | None = None
            half: dict[str, Usage] | None = None  # the second half: the live view's Timeline is full
            last = trio.usage()
            print(line(0, last), file=out, flush=True)
            next_at = t0 + every
            end = t0 + minutes * 60
            while True:
                now = time.monotonic()
                if base is None and now - t0 >= warmup * 60:
                    base = trio.usage()
                    print(line(now - t0, base) + "  <- end of warm-up", file=out, flush=True)
                if now >= next_at:
                    last = trio.usage()
                    if half is None and now - t0 >= minutes * 30:
                        half = last
                    print(line(now - t0, last), file=out, flush=True)
                    next_at += every
                if now >= end:
                    break
                if trio.dead():
                    failures.append(f"died: {trio.dead()}")
                    break
                time.sleep(min(1.0, max(0.0, min(next_at, end) - now)))
            last = trio.usage()
            if not trio.redraws():
                failures.append("the live view's clock stopped")
            if trio.scrape() != 200:
                failures.append("serve did not answer /metrics")
            for name, text in trio.tracebacks().items():
                failures.append(f"{name} printed a traceback:\n{text[-2000:]}")
            if base is not None:
                print(f"growth after the first {warmup:g} min "
                      f"({(time.monotonic() - t0) / 60 - warmup:.1f} min):", file=out)
                for n in NAMES:
                    d_rss, d_fd = last[n].rss_mb - base[n].rss_mb, last[n].fds - base[n].fds
                    print(f"  {n:6s} RSS {d_rss:+6.1f} MB  fds {d_fd:+d}", file=out)
                    if d_rss > bound_mb:
                        failures.append(f"{n}: RSS grew {d_rss:.1f} MB > {bound_mb:g} MB")
                    if d_fd > 2:
                        failures.append(f"{n}: {d_fd} more open descriptors")
            if half is not None:
                print(f"growth over the second half ({minutes / 2:g} min):", file=out)
                for n in NAMES:
                    print(f"  {n:6s} RSS {last[n].rss_mb - half[n].rss_mb:+6.1f} MB  "
                          f"fds {last[n].fds - half[n].fds:+d}", file=out)
        finally:
            trio.stop()
    for f in failures:
        print(f"FAIL {f}", file=out)
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60, help="how long to run (default 60)")
    ap.add_argument("--every", type=float, default=60, help="seconds between printed lines (default 60)")
    ap.add_argument("--warmup", type=float, default=5, help="minutes before growth is counted (default 5)")
    ap.add_argument("--interval", type=float, default=0.1, help="sampling interval of all three (default 0.1)")
    ap.add_argument("--bound-mb", type=float, default=5, help="allowed RSS growth after warm-up (default 5)")
    ap.add_argument("--all-ifaces", action="store_true",
                    help="read every interface of the host, not only eth0 and the lab's veth")
    a = ap.parse_args()
    return soak(a.minutes, a.every, a.warmup, a.interval, a.bound_mb, sys.stdout, a.all_ifaces)


if __name__ == "__main__":
    sys.exit(main())
