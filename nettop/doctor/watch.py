"""Findings over time: what appeared, what resolved, and whether an applied fix worked.

A `Watch` is fed one timeline point per tick (live source, recorder). It keeps only the
points its window needs plus a running minimum RTT per target (the idle baseline of
the bufferbloat rule), so a 24-hour recording holds no more than a few samples for it.
A finding that appears or resolves becomes a timeline `Event` of kind "finding": the
charts mark it, the recorder stores it, replay shows it, `nettop report` lists it.

`Verdict` is the before/after of one fix: the finding's figures when the fix was
applied and, after `settle_s`, whether it is gone or what its figures are now.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Deque, Iterable, Mapping

from nettop.doctor.engine import DoctorConfig, evaluate_window
from nettop.doctor.finding import Finding
from nettop.doctor.window import Window
from nettop.ebpf.sample import EbpfSample
from nettop.model.timeline import Event, Point, Timeline
from nettop.ping.stats import LatencyStats

EVENT_KIND = "finding"
# Whole points a Watch keeps per window: at a sub-second interval (the live view at
# `-i 0.1`) it keeps a tick whole only when it is at least window_s / WHOLE_PER_WINDOW
# after the last one kept, and of the others their probe figures (`Figures`). The rules
# read the window's first and last samples whole and every tick's latency and eBPF
# figures only; fifty whole snapshots of a host with a few hundred interfaces were tens
# of MB, which CPython keeps as its own once used (the live view's memory under churn,
# docs/collectors.md). At an interval of at least window_s / WHOLE_PER_WINDOW (0.5 s for
# the 5 s window) every tick is kept whole, as before.
WHOLE_PER_WINDOW = 10


@dataclass(frozen=True, slots=True)
class Figures:
    """The probe figures of one tick, all a Watch keeps of a tick it does not keep whole."""

    t_mono: float
    latency: Mapping[str, LatencyStats]
    ebpf: EbpfSample | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The effect of a fix on the finding it was applied for."""

    finding_id: str
    fix: str
    t_applied: float
    before: Mapping[str, float]
    resolved: bool | None = None  # None while waiting for samples after the fix
    after: Mapping[str, float] = field(default_factory=dict)

    def text(self) -> str:
        if self.resolved is None:
            return f"{self.finding_id}: waiting for samples after `{self.fix}`"
        keys = [k for k in self.before if k in self.after] or list(self.before)
        figs = ", ".join(f"{k} {self.before[k]:g} -> {self.after.get(k, 0.0):g}" for k in keys[:3])
        state = "resolved" if self.resolved else "NOT resolved"
        return f"{self.finding_id}: {state} after `{self.fix}`" + (f" ({figs})" if figs else "")


class Watch:
    """Evaluates the doctor per tick and turns changes into events. Thread-safe reads."""

    def __init__(self, config: DoctorConfig = DoctorConfig(), settle_s: float | None = None,
                 max_points: int = 120) -> None:
        self.config = config
        self.settle_s = settle_s if settle_s is not None else config.window_s + 1.0
        self._points: Deque[Point] = collections.deque(maxlen=max_points)  # kept whole
        self._figures: Deque[Figures] = collections.deque(maxlen=max_points)  # every tick's
        self._idle_rtt: dict[str, float] = {}
        self._events: Deque[Event] = collections.deque(maxlen=200)  # for the irqbalance rule
        self._lock = threading.Lock()
        self.findings: list[Finding] = []
        self.dismissed: set[str] = set()
        self.verdicts: dict[str, Verdict] = {}

    def observe(self, point: Point, timeline: Timeline | None = None,
                events: Iterable[Event] = ()) -> list[Event]:
        """Evaluate with `point` added; events for what appeared or resolved (also added to
        `timeline` when given)."""
        snap = point.snapshot
        points = self._points
        if len(points) >= 2 and points[-1].snapshot.t_mono - points[-2].snapshot.t_mono \
                < self.config.window_s / WHOLE_PER_WINDOW:
            points.pop()  # kept whole only while it was the newest; its figures stay
        points.append(point)
        self._figures.append(Figures(snap.t_mono, snap.latency, snap.ebpf))
        while len(points) > 2 and snap.t_mono - points[1].snapshot.t_mono >= self.config.window_s:
            points.popleft()  # the next one still spans the whole window
        figures = self._figures
        while figures[0].t_mono < points[0].snapshot.t_mono:  # (the newest is never older)
            figures.popleft()
        for target, st in snap.latency.items():
            if st.rtt_min_ms is not None and st.rtt_min_ms < self._idle_rtt.get(target, float("inf")):
                self._idle_rtt[target] = st.rtt_min_ms
        self._events.extend(e for e in events if e.kind == "tuning")
        if timeline is not None:
            self._events.extend(e for e in timeline.events(since=snap.t_wall - self.config.window_s)
                                if e.kind == "tuning" and e not in self._events)
        found = evaluate_window(self.window(), self.config)
        out: list[Event] = []
        with self._lock:
            before = {f.id: f for f in self.findings}
            now = {f.id: f for f in found}
            for fid, f in now.items():
                if fid not in before:
                    out.append(Event(snap.t_wall, EVENT_KIND, f"{f.severity.label} {f.id}: {f.title}"))
            for fid, f in before.items():
                if fid not in now:
                    out.append(Event(snap.t_wall, EVENT_KIND, f"resolved {fid}"))
            self.findings = found
            self._judge(snap.t_wall, now)
        if timeline is not None:
            for e in out:
                timeline.add_event(e)
        return out

    def window(self) -> Window:
        """The window the rules judge as of the last `observe` (which must have come):
        its first and last samples whole, every tick's probe figures between them."""
        return Window(list(self._points), self.config.window_s, self._events, self._idle_rtt, self._figures)

    def _judge(self, t_wall: float, now: Mapping[str, Finding]) -> None:
        for fid, v in list(self.verdicts.items()):
            if v.resolved is not None or t_wall - v.t_applied < self.settle_s:
                continue
            f = now.get(fid)
            self.verdicts[fid] = Verdict(fid, v.fix, v.t_applied, v.before, f is None,
                                         dict(f.figures) if f is not None else {})

    def applied(self, finding: Finding, fix: str, t_wall: float) -> None:
        """A fix for `finding` was applied at `t_wall`: judge it once `settle_s` has passed."""
        with self._lock:
            self.verdicts[finding.id] = Verdict(finding.id, fix, t_wall, dict(finding.figures))

    def dismiss(self, finding_id: str) -> None:
        with self._lock:
            self.dismissed.add(finding_id)

    def shown(self) -> list[Finding]:
        """Current findings less the dismissed ones."""
        with self._lock:
            return [f for f in self.findings if f.id not in self.dismissed]
