"""Survive the host, 6: the soak, short (issue 28; the hour is benchmarks/soak.py).

The live view (tmux), `record --dir` and `serve` run together at -i 0.1 on eth0 and a
lab veth under iperf3 traffic for 75 s. After a 15 s warm-up (imports done, first files
and sockets open, allocator settled) each process's RSS and open descriptors are read
again at the end.

Bounds for this length, looser than the hour's 5 MB, and why: <= 3 MB in 60 s for each.
- record and serve keep 2 points of history; the live view keeps 16 whole points (full
  within the warm-up), and for 3,600 samples the chart arrays (16 bytes a sample an
  interface) and a small digest a sample for the before/after screen: ~0.7 KB a sample
  in all (tracemalloc), ~0.4 MB for these 600 samples, ~2.5 MB once full after 6
  minutes, then flat.
- 3 MB leaves room for the allocator's noise in a short window; a leak of a whole
  snapshot a sample (~20 KB here) or of 5 KB a sample, 600 samples, would exceed it.
- descriptors: none may leak (<= +2, for a file being rotated or a scrape in flight).
"""

from __future__ import annotations

import time

import pytest
from survive import NAMES, Trio
from test_tui_tmux import TMUX, Tmux

pytestmark = [pytest.mark.lab, pytest.mark.live]

INTERVAL = 0.1
WARMUP_S = 15.0
RUN_S = 75.0
FLAT_MB = 3.0


@pytest.fixture
def tmux():
    if TMUX is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    t = Tmux()
    yield t
    t.kill()


def test_live_record_and_serve_at_a_tenth_of_a_second_do_not_grow(veth_lab, tmux, tmp_path):
    veth_lab.iperf3_server()
    veth_lab.iperf3_client(int(RUN_S) + 60, extra=["-b", "50M"])
    trio = Trio(tmp_path, INTERVAL, tmux, ["--iface", "eth0", "--iface", veth_lab.host_if])
    try:
        trio.start()
        t0 = time.monotonic()
        time.sleep(WARMUP_S)
        base = trio.usage()
        time.sleep(max(0.0, t0 + RUN_S - time.monotonic()))
        end = trio.usage()
        seconds = time.monotonic() - t0 - WARMUP_S
        assert not trio.dead(), {n: trio.stderr(n)[-2000:] for n in trio.dead()}
        assert not trio.tracebacks(), trio.tracebacks()
        assert trio.redraws() and trio.scrape() == 200
        for n in NAMES:
            growth = end[n].rss_mb - base[n].rss_mb
            print(f"{n}: RSS {base[n].rss_mb:.1f} -> {end[n].rss_mb:.1f} MB, fds {base[n].fds} -> {end[n].fds}")
            assert growth <= FLAT_MB, f"{n}: RSS grew {growth:.1f} MB in {seconds:.0f} s (bound {FLAT_MB:g})"
            assert end[n].fds <= base[n].fds + 2, f"{n}: descriptors {base[n].fds} -> {end[n].fds}"
    finally:
        trio.stop()
