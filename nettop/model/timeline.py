"""The timeline: a bounded history of snapshots, their rates, and events.

Whole points (a Snapshot and its Rates) cost CPUs × IRQs each, so a live view keeps only
the newest few (`whole_points`: what the current frame, sparklines and the doctor panel
read); the charts read the compact `history` (per-series arrays for `max_points`
samples) and the before/after screen reads `digests()`, one small record per sample made
by the `digest` function the source gives. Without `whole_points` every kept point stays
whole, as the recorder, serve and the doctor's CLI expect.

Live sampling, the recorder and replay all append snapshots here and read rates from
here, so every consumer sees the same figures. Events (a tuning change, an interface
appearing) are stored with their wall time so charts can draw a marker at that moment;
in the live view (`whole_points`) they expire with the oldest kept sample.
A Problem that a sample brings (a file that became unreadable or inconsistent, a
counter that went backwards) is an event too, once, when it first appears.
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Deque, Iterator, Protocol

from nettop.model.history import ChartHistory
from nettop.model.rates import Rates, compute_rates
from nettop.model.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Event:
    t_wall: float
    kind: str  # "tuning", "appeared", "vanished", "problem", ...
    text: str  # one line, e.g. "rps_cpus eth0 rx-0 0 → f0"


class DigestStore(Protocol):
    """Where a Timeline keeps its digests: appended oldest first, bounded by itself."""

    def append(self, item: Any, /) -> None: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Point:
    """One sample and the rates over the interval that ended with it."""

    snapshot: Snapshot
    rates: Rates | None  # None for the first sample


_NEW_PROBLEMS_PER_TICK = 5
MAX_EVENTS = 10_000
EVENT_GRACE_S = 5.0  # a wall clock that steps back a little does not expire fresh events
LIVE_WHOLE_POINTS = 16  # the most any screen reads whole: the doctor panel's 12, the idle fold's 10


class Timeline:
    """Thread-safe bounded history; appended by one producer, read by many."""

    def __init__(self, max_points: int = 3600, whole_points: int | None = None,
                 digest: Callable[[Snapshot, Rates], Any] | None = None,
                 digest_store: Callable[[int], DigestStore] | None = None) -> None:
        whole = max_points if whole_points is None else max(2, min(whole_points, max_points))
        self.max_points = max_points
        self._points: Deque[Point] = collections.deque(maxlen=whole)
        self.history = ChartHistory(max_points)
        self.digest = digest
        # where the digests go: a deque by default; the live view's is a preallocated ring
        # of columns (before_after.FiguresRing), so an hour of them is not 3,600 objects
        self._digests: DigestStore = (digest_store(max_points) if digest_store is not None
                                      else collections.deque(maxlen=max_points))
        self._events: Deque[Event] = collections.deque(maxlen=MAX_EVENTS)
        self.event_serial = 0  # events ever added: a chart's cue that its markers changed
        # whole_points (the live view): events older than the kept samples expire with them
        self._expire_events = whole_points is not None
        self._lock = threading.Lock()
        self._problems: frozenset[str] | None = None  # the last sample's, to see new ones

    def append(self, snap: Snapshot) -> Point:
        with self._lock:
            prev = self._points[-1].snapshot if self._points else None
        rates = None
        if prev is not None and snap.t_mono > prev.t_mono and math.isfinite(snap.t_mono - prev.t_mono):
            rates = compute_rates(prev, snap)
            self._note_changes(prev, snap)
        self._note_problems(snap, rates)
        point = Point(snap, rates)
        digest = self.digest(snap, rates) if self.digest is not None and rates is not None else None
        with self._lock:
            self._points.append(point)
            self.history.append(snap, rates)
            if digest is not None:
                self._digests.append(digest)
            if self._expire_events and self._events:
                self._expire(snap)
        return point

    def _expire(self, snap: Snapshot) -> None:
        """Drop events from before the oldest kept sample (under the lock). Nothing can
        draw them any more: the charts, the before/after screen and the doctor's window
        all read kept samples, and the recorder's tap has taken them the tick they came.
        A host that makes and destroys interfaces all day would otherwise keep the last
        10,000 appeared/vanished lines whatever the window."""
        oldest = self.history.oldest_t_mono()
        if oldest is None:
            return
        cutoff = snap.t_wall - (snap.t_mono - oldest) - EVENT_GRACE_S
        events = self._events
        while events and events[0].t_wall < cutoff:
            events.popleft()

    def add_event(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)
            self.event_serial += 1

    def latest(self) -> Point | None:
        with self._lock:
            return self._points[-1] if self._points else None

    def points(self) -> list[Point]:
        with self._lock:
            return list(self._points)

    def digests(self) -> list[Any]:
        """What `digest` made of each kept sample with rates, oldest first (empty without one)."""
        with self._lock:
            return list(self._digests)

    def chart(self, read: Callable[[ChartHistory], Any]) -> Any:
        """`read(history)` under the lock, so a chart never sees a half-appended sample."""
        with self._lock:
            return read(self.history)

    def events(self, since: float | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self._events if since is None or e.t_wall >= since]

    def __iter__(self) -> Iterator[Point]:
        return iter(self.points())

    def _note_problems(self, snap: Snapshot, rates: Rates | None) -> None:
        """Problems not in the previous sample become events (at most a few per tick);
        those of the first sample are where everything starts, not a change."""
        msgs = [p.message for p in snap.problems]
        if rates is not None:
            msgs += [p.message for p in rates.problems]
        before, self._problems = self._problems, frozenset(msgs)
        if before is None:
            return
        new = [m for m in dict.fromkeys(msgs) if m not in before]
        for m in new[:_NEW_PROBLEMS_PER_TICK]:
            self.add_event(Event(snap.t_wall, "problem", m))
        if len(new) > _NEW_PROBLEMS_PER_TICK:
            self.add_event(Event(snap.t_wall, "problem", f"... and {len(new) - _NEW_PROBLEMS_PER_TICK} more new problems"))

    def _note_changes(self, prev: Snapshot, cur: Snapshot) -> None:
        """Things that appeared or vanished become events, so the charts mark them."""
        for name in sorted(cur.links.keys() - prev.links.keys()):
            self.add_event(Event(cur.t_wall, "appeared", f"interface {name} appeared"))
        for name in sorted(prev.links.keys() - cur.links.keys()):
            self.add_event(Event(cur.t_wall, "vanished", f"interface {name} vanished"))
        for cpu in sorted(set(prev.online_cpus) - set(cur.online_cpus)):
            self.add_event(Event(cur.t_wall, "vanished", f"CPU {cpu} went offline"))
        for cpu in sorted(set(cur.online_cpus) - set(prev.online_cpus)):
            self.add_event(Event(cur.t_wall, "appeared", f"CPU {cpu} came online"))
        for irq in sorted(cur.interrupts.irqs.keys() - prev.interrupts.irqs.keys()):
            self.add_event(Event(cur.t_wall, "appeared", f"IRQ {irq} ({cur.interrupts.irqs[irq].name}) appeared"))
        for irq in sorted(prev.interrupts.irqs.keys() - cur.interrupts.irqs.keys()):
            self.add_event(Event(cur.t_wall, "vanished", f"IRQ {irq} ({prev.interrupts.irqs[irq].name}) vanished"))
