"""Survive the host, 1: interface churn (issue 28).

The live view (in tmux), `nettop record --dir` and `nettop serve` run together at -i 1,
reading every interface, while 2,000 veth pairs are created and destroyed in under 5
minutes: one in five renamed (down, `name`, up), one in five moved to a namespace of this
test and from there to a second one, one in five left with its peer moved away. The
churn goes through `ip -batch -` (one ip process per step reading many commands), paced
at 4 minutes; on an overloaded host (load average above its CPUs) it may take longer,
which is printed, not judged. Afterwards each process must be alive, free of
tracebacks and still working (the header's clock moves, /metrics answers 200, the
recording grew), no read may have failed, the recorder must keep its clock (its own
reads fitting the interval; see the lost-samples check) and no process's RSS may grow
over the churn's second half (see the bounds below).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import subprocess
import time

import pytest
from lab import can_build_lab

from nettop.model.timeline import LIVE_WHOLE_POINTS
from survive import NAMES, Trio
from test_tui_tmux import TMUX, Tmux

pytestmark = [pytest.mark.lab, pytest.mark.live]

PAIRS = 2000
ROUNDS = 20
CHURN_S = 240.0  # 2,000 pairs in 4 minutes (the issue asks for 5 at most)
INTERVAL = 1.0
# RSS growth allowed, and why. Every process reads the whole host each second; while the
# churn runs the host holds up to ~100 pairs of this test (200 veths) besides its own.
# - Over the second half of the churn (rounds 11-20, 1,100 names never seen before):
#   <= FLAT_MB for each. State kept per interface ever seen grows with every round (the
#   live view's ChartHistory used to: ~9 MB over such a half); what may still grow is the
#   live view's event log (appeared/vanished, ~440 a round, ~300 B each: ~1.3 MB, capped at
#   10,000 events) and the allocator's noise.
# - From before the churn to its end: record and serve keep 2 whole points (<= RSS_BOUND_MB:
#   Python keeps freed arenas; 2,000 names or netlink sockets leaked would be far above
#   it). The live view keeps LIVE_WHOLE_POINTS whole points, which fill with snapshots of
#   the churned host (~465 KB each with 200 veths, tracemalloc), its chart history (each
#   name's few seconds of figures, < 2 MB) and the event log: RSS_BOUND_MB plus
#   LIVE_WHOLE_POINTS × SNAPSHOT_MB. (Before the live view's history was bounded it
#   kept 3,600 whole snapshots: ~110 MB for this churn.)
RSS_BOUND_MB = 20.0
FLAT_MB = 5.0
SNAPSHOT_MB = 0.5


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
        self.took: list[float] = []

    def names(self, i: int) -> tuple[str, str, str]:
        return f"{self.prefix}a{i}", f"{self.prefix}b{i}", f"{self.prefix}r{i}"

    def setup(self) -> None:
        for ns in (self.ns1, self.ns2):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)

    def round(self, first: int, count: int, period_s: float) -> None:
        """Create, then rename and move, then move on, then destroy: each step a fifth of
        `period_s` after the last (or at once when the kernel was slower than that), so
        the deletions, the slowest step (each waits for the kernel's RCU grace period),
        have the last 40% of the round."""
        idx = range(first, first + count)
        start = time.monotonic()

        self.took = []  # seconds each step's commands and checks took (slow steps show load)

        def step(k: int) -> None:
            self.took.append(time.monotonic() - start - (k - 1) * period_s / 5)
            time.sleep(max(0.0, start + k * period_s / 5 - time.monotonic()))

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
        self.took.append(time.monotonic() - start - 3 * period_s / 5)

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


@pytest.mark.timeout(900)  # a hang guard: 20 rounds of at most 30 s, start, checks and export
def test_live_record_and_serve_survive_2000_veth_pairs_churned_in_4_minutes(tmux, tmp_path):
    churn = Churn()
    trio = Trio(tmp_path, INTERVAL, tmux)
    try:
        trio.start()
        churn.setup()
        time.sleep(3)
        before = trio.usage()
        load_start = os.getloadavg()[0]  # other work on the host, the trio idling
        size_before = trio.rec_bytes()
        t_start = time.time()
        per_round = PAIRS // ROUNDS
        t0 = time.monotonic()
        rounds = []  # each process's usage after each round
        for r in range(ROUNDS):
            round_start = time.monotonic()
            churn.round(r * per_round, per_round, CHURN_S / ROUNDS)
            assert not trio.dead(), {n: trio.stderr(n)[-2000:] for n in trio.dead()}
            rounds.append(trio.usage())
            print(f"round {r + 1}/{ROUNDS}: {time.monotonic() - round_start:.1f} s "
                  f"(steps {' '.join(f'{x:.1f}' for x in churn.took)}), at {time.monotonic() - t0:.0f} s; "
                  + ", ".join(f"{n} {u.rss_mb:.1f} MB" for n, u in rounds[-1].items()), flush=True)
            time.sleep(max(0.0, t0 + (r + 1) * CHURN_S / ROUNDS - time.monotonic()))
            assert time.monotonic() - round_start < 30, "a churn round took over 30 s"
        churn_s = time.monotonic() - t0
        t_end = time.time()
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

        # no lost samples. A read of the host that raised (an interface gone between two
        # reads) costs a sample and leaves a "sampler: ..." problem event; serve counts
        # them: none in any of the three.
        recording = trio.recording()
        failed = [e["text"] for e in recording["events"] if e["text"].startswith("sampler:")]
        assert not failed, failed[:5]
        assert trio.serve_sampler_errors() == 0
        assert not trio.live_sampler_problems(), tmux.screen()
        # The sampler keeps its 1 s grid and skips a tick its previous read ran past (it
        # never bursts). Each read's own CPU time (sampler_cpu_pct × elapsed) must fit in
        # half an interval: nettop itself keeps pace with the churned host. On a host with
        # CPU to spare that means every tick recorded (2 may be lost to a slow read, 1 at
        # each edge of the window) and no gap of 3 intervals. On an overloaded one (load
        # average before the churn above its CPUs: this 2-core machine runs other
        # tests, ~18) reads wait
        # for the CPU and for RTNL, which the churn's deletions hold, and ticks are
        # skipped; that is printed and only a stall fails: a round of the churn (12 s)
        # without a sample.
        samples = [x for x in recording["samples"] if t_start <= float(x["t_wall"]) <= t_end]
        times = [float(x["t_wall"]) for x in samples]
        expected = (t_end - t_start) / INTERVAL
        gaps = [b - a for a, b in zip(times, times[1:])]
        read_cpu = sorted(float(x["nettop.sampler_cpu_pct"]) * float(x["elapsed_s"]) / 100 for x in samples
                          if x.get("nettop.sampler_cpu_pct") is not None)
        print(f"recorded {len(times)} of {expected:.0f} ticks; gaps (intervals: count) "
              f"{sorted(collections.Counter(round(g / INTERVAL) for g in gaps).items())}; a read's CPU: median "
              f"{read_cpu[len(read_cpu) // 2]:.3f} s, max {read_cpu[-1]:.3f} s; load average {load_start:.1f} "
              f"before the churn, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")

        half = rounds[ROUNDS // 2 - 1]
        for n in NAMES:
            growth = after[n].rss_mb - before[n].rss_mb
            flat = after[n].rss_mb - half[n].rss_mb
            print(f"{n}: RSS {before[n].rss_mb:.1f} -> {half[n].rss_mb:.1f} (half) -> {after[n].rss_mb:.1f} MB, "
                  f"fds {before[n].fds} -> {after[n].fds}; churn {churn_s:.0f} s")
            assert flat <= FLAT_MB, f"{n}: RSS grew {flat:.1f} MB over the churn's second half (bound {FLAT_MB:g})"
            bound = RSS_BOUND_MB + (LIVE_WHOLE_POINTS * SNAPSHOT_MB if n == "live" else 0)
            assert growth <= bound, f"{n}: RSS grew {growth:.1f} MB during the churn (bound {bound:.0f})"
            assert after[n].fds <= before[n].fds + 2, f"{n}: descriptors {before[n].fds} -> {after[n].fds}"

        assert read_cpu[-1] < INTERVAL / 2, f"a read of the churned host took {read_cpu[-1]:.2f} s of CPU"
        assert max(gaps) < CHURN_S / ROUNDS, f"the recorder stalled for {max(gaps):.1f} s"
        # the churn's own pace: 2,000 pairs in 5 minutes at most. On an overloaded host the
        # ip commands are slower than that (~2x again while three nettops read the 200
        # veths each second and take RTNL for their ethtool requests): printed, not judged
        print(f"churn: {churn_s:.0f} s for {PAIRS} pairs")
        if load_start < (os.cpu_count() or 1):
            assert churn_s <= 300, f"the churn took {churn_s:.0f} s, over 5 minutes"
            assert len(times) >= expected - 4, (len(times), expected)
            assert max(gaps) < 3 * INTERVAL, max(gaps)
    finally:
        with contextlib.suppress(Exception):
            trio.stop()
        churn.cleanup()
        assert not links(churn.prefix), "veths of this test were left behind"
