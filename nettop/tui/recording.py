"""Recording what the live screen shows: a tap on the producer's side of the Timeline.

The source calls `feed` on its own thread right after each snapshot goes into the
Timeline, so a slow frame (or a UI stuck for seconds) never costs a recorded sample,
and the file holds every sample the screen could have shown, not just the drawn ones.
The writer is `nettop.record.recorder.LiveRecording`; a write that fails (disk full,
read-only file system) stops the tap and leaves one line in `error` for the UI, which
keeps running. The UI only starts, stops and reads the status.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event, Timeline


@dataclass(frozen=True, slots=True)
class RecordStatus:
    path: str
    samples: int
    size: int  # bytes on disk, database and WAL


def recording_meta(snap: Snapshot | None, interval: float, cpu_nodes: Mapping[int, int],
                   root: str = "/", latency_target_ms: float | None = None) -> dict[str, Any]:
    """The meta a replay needs: as the headless recorder writes it."""
    meta: dict[str, Any] = {"interval_s": interval, "cpu_nodes": {str(c): n for c, n in cpu_nodes.items()},
                            "started": time.time(), "root": root, "recorded_by": "nettop TUI"}
    if latency_target_ms is not None:  # what the recorded findings were judged against
        meta["latency_target_ms"] = latency_target_ms
    if snap is not None:
        meta["host"], meta["kernel"] = snap.host, snap.kernel
    return meta


def _journal_path() -> str | None:
    try:
        from nettop.actions.journal import default_path
    except ImportError:
        return None
    return default_path()


class RecordingTap:
    """Start/stop from the UI thread, `feed` from the producer thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rec: Any = None  # LiveRecording while recording
        self._path = ""
        self._since = 0.0  # events at or after this wall time may still be new
        self._written: set[Event] = set()
        self.error: str | None = None  # why the last recording stopped by itself
        self.finished: RecordStatus | None = None  # the last file closed, by stop or by an error

    @property
    def active(self) -> bool:
        return self._rec is not None

    def start(self, path: str, meta: dict[str, Any], timeline: Timeline) -> None:
        """Open `path` (never overwriting); RecordingError with one line if it cannot be."""
        from nettop.record.recorder import LiveRecording

        rec = LiveRecording(path, meta, journal=_journal_path())
        latest = timeline.latest()
        since = latest.snapshot.t_wall if latest is not None else time.time()
        with self._lock:
            self._rec, self._path, self.error = rec, path, None
            self._since = since
            self._written = set(timeline.events(since=since))  # already on screen before the start

    def feed(self, snap: Snapshot, timeline: Timeline) -> None:
        """Write `snap` and the events that arrived with it; called by the producer."""
        with self._lock:
            rec = self._rec
            if rec is None:
                return
            recent = timeline.events(since=self._since)
            new = [e for e in recent if e not in self._written]
            self._since = snap.t_wall
            self._written = {e for e in recent if e.t_wall >= snap.t_wall}
            rec.add(snap, new)
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

    def _close(self, rec: Any) -> RecordStatus:
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


def display_path(path: str) -> str:
    """The path as the header shows it: relative to the current directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


__all__ = ["RecordStatus", "RecordingTap", "display_path", "recording_meta"]
