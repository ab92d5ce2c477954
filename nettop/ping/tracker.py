"""Per-target bookkeeping: probes in flight, their fate, and the current window.

Socket code only reports events (sent, kernel stamps, a reply, an error); this class
decides what counts: a reply counts once, only while its probe is pending and its RTT
is within the timeout; a duplicate or late reply is counted apart and never as an RTT
sample. A probe is counted in `sent` in the window where its fate is decided (reply,
error or timeout), so a window never shows more replies than probes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from nettop.ping.histogram import RttHistogram
from nettop.ping.stats import LatencyStats, summarize

STALL_NS = 200_000  # a clock-read-to-qdisc gap longer than this is a stall, not the stack
_MEMORY = 8192  # probe numbers remembered after they are decided, to spot dups and late


@dataclass(slots=True)
class _Pending:
    user_ns: int  # CLOCK_REALTIME just before the send syscall
    mono_ns: int  # CLOCK_MONOTONIC just before the send syscall
    tx_ns: int | None = None  # the kernel's TX_SCHED stamp, CLOCK_REALTIME


class Tracker:
    """Everything about one target's probes; `take()` may be called from any thread."""

    def __init__(self, target: str, timeout_ns: int) -> None:
        self.target = target
        self.timeout_ns = timeout_ns
        self.address: str | None = None
        self.error: str | None = None
        self.pending: dict[int, _Pending] = {}
        self._answered: dict[int, None] = {}
        self._expired: dict[int, None] = {}
        self._lock = threading.Lock()
        self._sent = 0
        self._rtts: list[float] = []
        self.duplicates = 0  # lifetime counts, for tests and diagnostics
        self.late = 0
        self.foreign = 0  # replies that matched no probe of ours
        self.histogram = RttHistogram()  # lifetime, for `nettop serve`
        self.raw: list[float] | None = None  # every RTT in ms while set (nettop experiment's phases)
        # CLOCK_MONOTONIC of the newest reply to a probe of ours, late ones included: the
        # target answers, however slowly (the experiment's dead-man switch asks this)
        self.last_reply_ns: int | None = None

    # --- events from the socket code ---------------------------------------------

    def sent(self, probe: int, user_ns: int, mono_ns: int) -> None:
        self.pending[probe] = _Pending(user_ns, mono_ns)

    def tx_stamp(self, probe: int, tx_ns: int) -> None:
        p = self.pending.get(probe)
        if p is not None and tx_ns >= p.user_ns:
            p.tx_ns = tx_ns

    def reply(self, probe: int, rx_ns: int | None, rtt_ns: int | None = None) -> bool:
        """A reply to `probe` received at kernel time `rx_ns` (or with a measured
        `rtt_ns`). True when it counted as a received reply."""
        p = self.pending.pop(probe, None)
        if p is None:
            if probe in self._answered:
                self.duplicates += 1
            elif probe in self._expired:
                self.late += 1
                self.last_reply_ns = time.monotonic_ns()
            else:
                self.foreign += 1
            return False
        now_mono = time.monotonic_ns()
        self.last_reply_ns = now_mono
        upper = now_mono - p.mono_ns  # the RTT can be no longer than this
        if rtt_ns is None:
            start = p.user_ns
            if p.tx_ns is not None and p.tx_ns - p.user_ns > STALL_NS:
                start = p.tx_ns  # this thread stalled between its clock read and the send
            rtt_ns = rx_ns - start if rx_ns is not None else upper
            # A stepped wall clock between send and receive: trust the monotonic bound.
            if not 0 <= rtt_ns <= upper + 1_000_000:
                rtt_ns = upper
        if rtt_ns > self.timeout_ns:
            self._remember(self._expired, probe)
            self.late += 1
            with self._lock:
                self._sent += 1
            self.histogram.lost()
            return False
        self._remember(self._answered, probe)
        with self._lock:
            self._sent += 1
            self._rtts.append(rtt_ns / 1e6)
        self.histogram.observe(rtt_ns / 1e9)
        raw = self.raw
        if raw is not None and len(raw) < 1_000_000:
            raw.append(rtt_ns / 1e6)
        self.error = None
        return True

    def lost(self, probe: int, error: str | None = None) -> None:
        """`probe` is known lost now (an ICMP error, a failed send)."""
        if error:
            self.error = error
        if self.pending.pop(probe, None) is not None:
            self._remember(self._expired, probe)
            with self._lock:
                self._sent += 1
            self.histogram.lost()

    def expire(self, now_mono_ns: int) -> tuple[list[int], int | None]:
        """Count probes older than the timeout as lost.

        Returns (the probes just expired, monotonic ns of the next expiry or None).
        """
        gone: list[int] = []
        for probe, p in self.pending.items():  # insertion order is send order
            if p.mono_ns + self.timeout_ns > now_mono_ns:
                break
            gone.append(probe)
        for probe in gone:
            del self.pending[probe]
            self._remember(self._expired, probe)
        if gone:
            with self._lock:
                self._sent += len(gone)
            self.histogram.lost(len(gone))
        nxt = next(iter(self.pending.values()), None)
        return gone, (nxt.mono_ns + self.timeout_ns if nxt else None)

    # --- the window -------------------------------------------------------------

    def take(self) -> LatencyStats:
        with self._lock:
            sent, rtts = self._sent, self._rtts
            self._sent, self._rtts = 0, []
        return summarize(rtts, sent, self.target, self.address, self.error)

    @staticmethod
    def _remember(memory: dict[int, None], probe: int) -> None:
        memory[probe] = None
        if len(memory) > _MEMORY:
            del memory[next(iter(memory))]
