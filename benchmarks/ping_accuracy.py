"""RTT accuracy of nettop's prober against iputils ping, on a veth pair of our own.

Builds a lab pair (tests/lab.py), then for 10 and 1000 probes/s measures the RTT to
the peer with nettop's Prober and with iputils `ping` in the same run (one after the
other, alternating in rounds so drift hits both alike), and prints both medians and
p99s and their difference. Target: medians within 10 µs or 5 %, whichever is larger.

ping is driven with an argv list and its per-packet `time=` lines are parsed; at
1000/s it needs root (-i 0.001). Usage (as root):
    .venv/bin/python benchmarks/ping_accuracy.py [--seconds-slow 20] [--seconds-fast 5]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

import lab as lab_mod  # noqa: E402

from nettop.ping import Prober, percentile  # noqa: E402

_TIME = re.compile(r"\btime=([0-9.]+) ms")


def ping_rtts(target: str, rate: int, count: int) -> list[float]:
    """Per-packet RTTs (ms) that iputils ping prints for `count` probes at `rate`/s."""
    argv = ["ping", "-n", "-i", f"{1 / rate:g}", "-c", str(count), "-W", "1", target]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=count / rate + 30)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"ping failed: {out.stderr.strip()}")
    return [float(m.group(1)) for m in _TIME.finditer(out.stdout)]


def nettop_stats(target: str, rate: int, seconds: float) -> tuple[float, float, int, int]:
    """(p50, p99, received, sent) of nettop's prober over `seconds` at `rate`/s."""
    with Prober([target], interval_s=1 / rate, timeout_s=1.0, mode="raw") as p:
        time.sleep(0.5)
        p.take()
        time.sleep(seconds)
        s = p.take()[target]
    if not s.received:
        raise RuntimeError(f"nettop got no replies: {s.error}")
    return s.rtt_p50_ms, s.rtt_p99_ms, s.received, s.sent  # type: ignore[return-value]


def compare(target: str, rate: int, seconds: float, rounds: int) -> bool:
    n_p50s: list[float] = []
    n_p99s: list[float] = []
    ping_all: list[float] = []
    n_recv = n_sent = 0
    count = int(rate * seconds)
    for _ in range(rounds):
        p50, p99, recv, sent = nettop_stats(target, rate, seconds)
        n_p50s.append(p50)
        n_p99s.append(p99)
        n_recv += recv
        n_sent += sent
        ping_all += ping_rtts(target, rate, count)
    ping_sorted = sorted(ping_all)
    p_p50, p_p99 = percentile(ping_sorted, 50), percentile(ping_sorted, 99)
    n_p50 = sorted(n_p50s)[len(n_p50s) // 2]
    n_p99 = sorted(n_p99s)[len(n_p99s) // 2]
    diff_us = (n_p50 - p_p50) * 1000
    allowed_us = max(10.0, 0.05 * p_p50 * 1000)
    ok = abs(diff_us) <= allowed_us
    print(f"{rate:>5}/s  nettop: median {n_p50 * 1000:8.1f} µs  p99 {n_p99 * 1000:8.1f} µs  "
          f"({n_recv}/{n_sent} replies)")
    print(f"{'':>7}  ping:   median {p_p50 * 1000:8.1f} µs  p99 {p_p99 * 1000:8.1f} µs  "
          f"({len(ping_all)}/{count * rounds} replies)")
    print(f"{'':>7}  difference of medians {diff_us:+.1f} µs, p99 {(n_p99 - p_p99) * 1000:+.1f} µs;"
          f" allowed ±{allowed_us:.1f} µs -> {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds-slow", type=float, default=10.0, help="per round at 10/s")
    ap.add_argument("--seconds-fast", type=float, default=3.0, help="per round at 1000/s")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root: builds a veth lab and runs ping -i 0.001", file=sys.stderr)
        return 2
    lab_mod.sweep_leftovers()
    with lab_mod.veth_lab() as lab:
        subprocess.run(["ping", "-n", "-q", "-c", "3", "-i", "0.2", lab.peer_ip],
                       capture_output=True, check=True)  # resolve ARP before measuring
        print(f"lab {lab.host_if} -> {lab.peer_ip} ({lab.netns}); {args.rounds} rounds each, "
              "nettop and ping alternating")
        ok = compare(lab.peer_ip, 10, args.seconds_slow, args.rounds)
        ok = compare(lab.peer_ip, 1000, args.seconds_fast, args.rounds) and ok
    print("target (medians within 10 µs or 5 %):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
