"""Recording what the live pipeline samples: a tap on the producer's side of the Timeline.

The pipeline calls `feed` on its sampler thread right after each snapshot goes into the
Timeline, so a slow frame (or a UI stuck for seconds) never costs a recorded sample,
and the file holds every sample the screen could have shown, not just the drawn ones.
The file itself is opened by the `opener` the tap is given (`nettop.record.recorder.
open_live_recording`: the recording package sits above this one); a write that fails
(disk full, read-only file system) stops the tap and leaves one line in `error` for the
UI, which keeps running. The UI only starts, stops and reads the status.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol

from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event, Timeline


@dataclass(frozen=True, slots=True)
class RecordStatus:
    path: str
    samples: int
    size: int  # bytes on disk, database and WAL


class _Written(Protocol):
    samples: int

    def size(self) -> int: ...


class Recording(Protocol):
    """An open recording file (`nettop.record.recorder.LiveRecording`)."""

    error: str | None

    @property
    def writer(self) -> _Written: ...
    def add(self, snap: Snapshot, events: Iterable[Event] = ()) -> None: ...
    def stop(self) -> int: ...


Opener = Callable[[str, dict[str, Any]], Recording]  # path, meta -> the open file


def recording_meta(snap: Snapshot | None, interval: float, cpu_nodes: Mapping[int, int],
                   root: str = "/", latency_target_ms: float | None = None) -> dict[str, Any]:
    """The meta a replay needs: as the headless recorder writes it."""
    meta: dict[str, Any] = {"interval_s": interval, "cpu_nodes": {str(c): n for c, n in cpu_nodes.items()},
                            "started": time.time(), "root": root, "recorded_by": "nettop TUI"}
    if latency_target_ms is not None:  # what the recorded findings were judged against
        meta["latency_target_ms"] = latency_target_ms
    if snap is not None:
        meta["host"], meta["kernel"] = snap.host, snap.kernel
    meta.update(capture_meta(root))
    return meta


def capture_meta(root: str) -> dict[str, Any]:
    """For a recording of a captured tree: when it was captured, so a replay shows that
    time and never looks live ({} for the live kernel or an unknown time)."""
    if root in ("/", ""):
        return {}
    from nettop.capture.archive import capture_time

    when = capture_time(root)
    return {"captured": "1", **({"captured_at": when} if when is not None else {})}


class EventCursor:
    """The Timeline events that arrived with each sample, each handed out once.

    Events are added by several threads (the sampler's appeared/vanished, the doctor's
    findings, the UI's tuning lines), so "new" is judged by time and identity, never by a
    position in the bounded event list."""

    def __init__(self, since: float | None = None, seen: Iterable[Event] = ()) -> None:
        self._since = since
        self._written: set[Event] = set(seen)

    def new(self, snap: Snapshot, timeline: Timeline) -> list[Event]:
        recent = timeline.events(since=self._since)
        out = [e for e in recent if e not in self._written]
        self._since = snap.t_wall
        self._written = {e for e in recent if e.t_wall >= snap.t_wall}
        return out


class RecordingTap:
    """Start/stop from the UI thread, `feed` from the producer thread."""

    def __init__(self, opener: Opener, root: str = "/") -> None:
        self._opener = opener
        self.root = root  # the tree the pipeline reads, for the file's meta
        self._lock = threading.Lock()
        self._rec: Recording | None = None  # while recording
        self._path = ""
        self._cursor = EventCursor()
        self.error: str | None = None  # why the last recording stopped by itself
        self.finished: RecordStatus | None = None  # the last file closed, by stop or by an error

    @property
    def active(self) -> bool:
        return self._rec is not None

    def start(self, path: str, meta: dict[str, Any], timeline: Timeline) -> None:
        """Open `path` (never overwriting); RecordingError with one line if it cannot be."""
        rec = self._opener(path, meta)
        latest = timeline.latest()
        since = latest.snapshot.t_wall if latest is not None else time.time()
        with self._lock:
            self._rec, self._path, self.error = rec, path, None
            # what is already on screen before the start is not written again
            self._cursor = EventCursor(since, timeline.events(since=since))

    def feed(self, snap: Snapshot, timeline: Timeline) -> None:
        """Write `snap` and the events that arrived with it; called by the producer."""
        with self._lock:
            rec = self._rec
            if rec is None:
                return
            rec.add(snap, self._cursor.new(snap, timeline))
            if rec.error is not None:
                self.error = rec.error
                self._close(rec)

    def stop(self) -> RecordStatus | None:
        """Close the file; what was written, or None when not recording."""
        with self._lock:
            rec = self._rec
            if rec is None:
                return None
            return self._close(rec)

    def _close(self, rec: Recording) -> RecordStatus:
        self._rec = None
        try:
            samples = rec.stop()
        except Exception as exc:  # noqa: BLE001 - a close that fails is one more line, not a crash
            self.error = self.error or f"closing {self._path}: {exc}"
            samples = rec.writer.samples
        self.finished = RecordStatus(self._path, samples, rec.writer.size())
        return self.finished

    def status(self) -> RecordStatus | None:
        rec = self._rec
        if rec is None:
            return None
        return RecordStatus(self._path, rec.writer.samples, rec.writer.size())


__all__ = ["EventCursor", "Opener", "RecordStatus", "Recording", "RecordingTap", "recording_meta"]
