"""`ReplaySource`: a recording played into a Timeline, as the TUI's `Source`.

The app cannot tell it from live: each recorded snapshot is appended to a Timeline, so
rates are `compute_rates(prev, cur)` over the very snapshots the recorder saw, and the
appeared/vanished events come back the same way. Recorded events of other kinds
(tuning, marks, problems) are added when playback passes their time. Playback runs on
its own thread at 1x to 60x the recorded pace; seek rebuilds the Timeline from the
samples before the target so charts show the history they showed live.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Mapping

from nettop.record.series import open_recording
from nettop.model.timeline import Event, Point, Timeline

if TYPE_CHECKING:
    from nettop.doctor import Finding
    from nettop.pipeline import Source

MIN_SPEED, MAX_SPEED = 1.0, 60.0
REGENERATED = ("appeared", "vanished")  # the Timeline makes these again on append
HISTORY = 180  # samples replayed into the Timeline before a seek target


class ReplaySource:
    """Plays `path`; `mode` is "replay" and tuning is off (`is_root` False).

    No recording tap, eBPF switch, live doctor or prober: the recorded figures are shown
    as they were, and findings are evaluated per point against `doctor_config`, on the
    thread that makes the point (playback's own, or a seek's worker), not the UI's."""

    tap = None
    probe_switch = None
    doctor = None
    prober = None

    def __init__(self, path: str, speed: float = 1.0, max_points: int = 3600) -> None:
        self.reader = open_recording(path)  # a file, or a `record --dir` directory as one
        self.path = path
        self.mode = "replay"
        self.is_root = False  # the app's tuning actions stay disabled
        self.host = self.reader.meta.get("host", "?")
        self.cpu_nodes: Mapping[int, int] = _nodes(self.reader.meta.get("cpu_nodes"))
        from nettop.doctor import DoctorConfig
        self.doctor_config = DoctorConfig.from_meta(self.reader.meta)  # as the recorder judged
        self._max_points = max_points
        self.timeline = Timeline(max_points=max_points)
        self.events = [e for e in self.reader.events()]
        self.speed = clamp_speed(speed)
        self._warned: str | None = None
        self._pos = -1  # index position of the last sample appended
        self._next_event = 0
        self._paused = False
        self._latest: Point | None = None
        self._pending: Point | None = None
        self._findings: list[Finding] = []  # judged at _latest
        self._lock = threading.RLock()
        self._wake_fn: Callable[[], None] | None = None
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            self._recorded_interval = float(self.reader.meta.get("interval_s", "1"))
        except ValueError:
            self._recorded_interval = 1.0
        # a recording of a captured tree: its header says so and shows the capture's time
        self.of_capture = self.reader.meta.get("captured") == "1"
        try:
            self.captured_at = float(self.reader.meta["captured_at"]) if self.of_capture else None
        except (KeyError, ValueError):
            self.captured_at = None
        if self.of_capture and len(self.reader) >= 2:  # judged over boot → capture, as recorded
            import dataclasses
            span = self.reader.index[-1].t_mono - self.reader.index[0].t_mono
            self.doctor_config = dataclasses.replace(self.doctor_config, window_s=max(span, 0.0) + 1.0)

    # --- Source protocol ----------------------------------------------------------------

    @property
    def warnings(self) -> list[str]:
        return self.reader.warnings

    @property
    def interval(self) -> float:
        """The recorded interval divided by the speed: the pace the screen changes at."""
        return self._recorded_interval / self.speed

    @interval.setter
    def interval(self, seconds: float) -> None:
        # the app's +/- keys: a shorter interval plays faster
        self.speed = clamp_speed(self._recorded_interval / max(seconds, 1e-3))
        self._kick.set()

    @property
    def paused(self) -> bool:
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused = value
        self._kick.set()

    def start(self, wake: Callable[[], None]) -> None:
        self._wake_fn = wake
        if self._pos < 0:
            self.step(1)
        elif self._pending is not None:
            wake()  # a seek before start (`replay --at`) published its point to nobody yet
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="nettop-replay", daemon=True)
            self._thread.start()

    def take(self) -> Point | None:
        with self._lock:
            point, self._pending = self._pending, None
            return point

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None
        self.reader.close()

    def own_cpu_percent(self) -> float | None:
        return None

    def findings(self) -> list[Finding]:
        with self._lock:
            return self._findings

    def route_ifindexes(self) -> tuple[int, ...]:
        return ()  # the recording does not hold the routes: the summary's own order applies

    def show_settings(self, ifnames: Iterable[str],
                      queues: Mapping[str, Collection[tuple[str, int]]] | None = None) -> None:
        return None  # nothing is read: the settings are what the source holds

    def session(self) -> None:
        return None  # a recording is reviewed, not tuned: no session path to protect

    of_capture = False  # a recording of a captured tree (meta "captured")
    captured_at: float | None = None  # its capture time, when known
    capture_note: str | None = None

    def playback(self) -> ReplaySource:
        return self

    @property
    def length(self) -> int:
        return len(self.reader)

    # --- playback ------------------------------------------------------------------------

    @property
    def position(self) -> int:
        return self._pos

    @property
    def at_end(self) -> bool:
        return self._pos >= len(self.reader) - 1

    def step(self, n: int = 1) -> Point | None:
        """Forward n samples (n < 0: back, by a seek); the newest point, or None at the end."""
        if n < 0:
            return self.seek_index(self._pos + n)
        point = None
        with self._lock:
            for _ in range(n):
                point = self._advance() or point
        if point is not None:
            self._publish(point)
        return point

    def _advance(self) -> Point | None:
        while self._pos < len(self.reader) - 1:
            self._pos += 1
            snap = self.reader.snapshot(self.reader.index[self._pos].seq)
            if snap is None:  # damaged: say so once on the charts, go on with the next intact one
                if self.reader.warnings and self.reader.warnings[-1] != self._warned:
                    self._warned = self.reader.warnings[-1]
                    t = self.reader.index[self._pos].t_wall
                    self.timeline.add_event(Event(t, "problem", self._warned))
                continue
            point = self.timeline.append(snap)
            self._add_events_until(snap.t_wall)
            return point
        return None

    def _add_events_until(self, t_wall: float) -> None:
        while self._next_event < len(self.events) and self.events[self._next_event].t_wall <= t_wall:
            e = self.events[self._next_event]
            if e.kind not in REGENERATED:
                self.timeline.add_event(e)
            self._next_event += 1

    def seek(self, t_wall: float) -> Point | None:
        """Show the last sample at or before wall time `t_wall`."""
        return self.seek_index(self.reader.position(t_wall))

    def seek_index(self, pos: int) -> Point | None:
        pos = max(0, min(pos, len(self.reader) - 1))
        with self._lock:
            self.timeline = Timeline(max_points=self._max_points)
            self._pos = max(-1, pos - HISTORY)
            first = self.reader.index[self._pos + 1].t_wall if len(self.reader) else 0.0
            self._next_event = 0
            while self._next_event < len(self.events) and self.events[self._next_event].t_wall < first:
                self._next_event += 1
            point = None
            while self._pos < pos:
                point = self._advance() or point
        if point is not None:
            self._publish(point)
        return point

    def next_event(self, direction: int = 1, kinds: tuple[str, ...] | None = None) -> Event | None:
        """Seek to the next (direction 1) or previous (-1) event; None when there is none."""
        if self._pos < 0 or not self.reader.index:
            return None
        now = self.reader.index[self._pos].t_wall
        cands = [e for e in self.events if kinds is None or e.kind in kinds]
        if direction > 0:
            found = next((e for e in cands if e.t_wall > now), None)
        else:
            found = next((e for e in reversed(cands) if e.t_wall < now - 1e-9
                          and self.reader.position(e.t_wall) < self._pos), None)
        if found is not None:
            self.seek(found.t_wall)
        return found

    def _publish(self, point: Point) -> None:
        from nettop.doctor import evaluate_recent

        with self._lock:
            self._findings = evaluate_recent(self.timeline.points(), self.doctor_config)
            self._latest = point
            wake = self._pending is None
            self._pending = point
        if wake and self._wake_fn is not None:
            self._wake_fn()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._kick.clear()
            if self._paused or self.at_end:
                self._kick.wait(0.5)
                continue
            pos = self._pos
            gap = self._recorded_interval
            if 0 <= pos < len(self.reader) - 1:
                gap = self.reader.index[pos + 1].t_mono - self.reader.index[pos].t_mono
            if self.of_capture:  # boot → capture is the uptime, not a time to wait through
                gap = min(gap, self.speed)
            if self._kick.wait(max(0.0, gap) / self.speed):
                continue  # paused, sped up or seeked: recompute
            with self._lock:
                if self._pos == pos:
                    self.step(1)


if TYPE_CHECKING:
    def _is_a_source(s: ReplaySource) -> Source:
        return s  # mypy checks that a replay is a complete Source for the live view


def clamp_speed(speed: float) -> float:
    return float(min(MAX_SPEED, max(MIN_SPEED, speed)))


def _nodes(text: str | None) -> dict[int, int]:
    import json
    try:
        raw = json.loads(text or "{}")
        return {int(k): int(v) for k, v in raw.items()}
    except (ValueError, AttributeError, TypeError):
        return {}
