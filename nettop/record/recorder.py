"""The headless recorder: the live pipeline + Writer, no screen, no Textual.

The pipeline's sampler thread appends each snapshot to a Timeline (for the same
appeared/vanished events as live), adds the tuning journal's new entries, lets the
doctor judge it and queues it with the events that came with it; this loop (the main
thread) writes each in one transaction and prints one status line. SIGINT/SIGTERM end it after the current sample; a write that fails (disk full,
read-only file system) ends it with one line and leaves every committed sample.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TextIO

from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event, Point
from nettop.pipeline import EventCursor, LivePipeline
from nettop.record.store import RecordingError, Writer

UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """'100M' -> 104857600; k, M, G are powers of 1024; ValueError with one line."""
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = t[-1:] if t[-1:] in UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise ValueError(f"size {text!r} is not a size (e.g. 500M, 2G)") from None
    if value <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return int(value * UNITS[unit])


def parse_duration(text: str) -> float:
    """'90', '90s', '15m', '24h', '2d' -> seconds."""
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    k = mult.get(t[-1:], None)
    try:
        value = float(t[:-1] if k else t)
    except ValueError:
        raise ValueError(f"duration {text!r} is not a duration (e.g. 90s, 15m, 24h)") from None
    if value <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return value * (k or 1)


@dataclass(frozen=True, slots=True)
class Result:
    samples: int
    reason: str  # why it stopped, one line
    ok: bool


class JournalTail:
    """New entries of the tuning journal since the recorder started, as events."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._offset = 0
        if path:
            try:
                self._offset = os.stat(path).st_size
            except OSError:
                self._offset = 0

    def poll(self) -> list[Event]:
        if not self.path:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next poll
        self._offset += end
        out = []
        import json
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("op") in ("begin", "end"):
                out.append(Event(float(rec.get("t", time.time())), "tuning", _journal_text(rec)))
        return out


def _journal_text(rec: dict[str, Any]) -> str:
    """One line per journal record: what was set (begin), how it ended (end)."""
    op = rec.get("op")
    if op == "begin":
        text = rec.get("text") or f"{rec.get('key')} {rec.get('before')!r} → {rec.get('value')!r}"
        return f"#{rec.get('id')} {rec.get('action', 'set')}: {text}"
    if op == "end":
        state = "failed: " + str(rec["error"]) if rec.get("error") else (
            "verified" if rec.get("verified") else "not verified")
        return f"#{rec.get('id')} done ({state}), now {rec.get('after')!r}"
    return f"{op}: {rec.get('action') or rec.get('reason') or ''}".strip()


class Recorder:
    """Records `reader` every `interval` s into `path` until stopped, `duration` or `max_size`."""

    def __init__(self, reader: Any, path: str, interval: float = 1.0, duration: float | None = None,
                 max_size: int | None = None, meta: dict[str, Any] | None = None,
                 journal: str | None = None, out: TextIO | None = None,
                 on_snapshot: Callable[[Snapshot], None] | None = None,
                 latency_target_ms: float | None = None, rotation: Any = None, clock: Any = None) -> None:
        self.reader = reader
        self.path = path
        self.interval = interval
        self.duration = duration
        self.max_size = max_size
        self.meta = dict(meta or {})
        self.meta.setdefault("interval_s", interval)
        if latency_target_ms is not None:  # what the recorded findings were judged against
            self.meta["latency_target_ms"] = latency_target_ms
        self.journal = JournalTail(journal)
        self.out = out if out is not None else sys.stdout
        self.on_snapshot = on_snapshot
        self.stop_event = threading.Event()
        self._queue: queue.Queue[tuple[Snapshot, list[Event]]] = queue.Queue(maxsize=1000)
        self.pipeline = LivePipeline(reader=reader, interval=interval, max_points=2,
                                     latency_target_ms=latency_target_ms, extra_events=self.journal.poll)
        self.pipeline.listeners.append(self._on_point)
        self.timeline = self.pipeline.timeline
        self._cursor = EventCursor()
        self.rotation = rotation  # rotate.Rotation: `record --dir`, one file per period
        self.clock = clock  # wallclock.Clock for the files' times; None: the system's
        self.hup = threading.Event()  # SIGHUP: the next sample goes into a new file
        self.lost = 0

    def request_stop(self, *_: Any) -> None:
        self.stop_event.set()

    def request_rotate(self, *_: Any) -> None:
        self.hup.set()

    def _open_writer(self) -> Any:
        if self.rotation is None:
            return Writer(self.path, self.meta)
        from nettop.record.rotate import DirWriter
        return DirWriter(self.rotation, self.meta, clock=self.clock, hup=self.hup, out=self.out)

    def _on_point(self, point: Point) -> None:
        """On the sampler thread, after the doctor: the sample and its new events
        (appeared/vanished, journal entries, findings), for the writing loop."""
        snap = point.snapshot
        try:
            self._queue.put_nowait((snap, self._cursor.new(snap, self.timeline)))
        except queue.Full:
            pass  # the writer is stalled: drop rather than grow without bound

    def run(self) -> Result:
        writer = self._open_writer()
        started = time.monotonic()
        reason, ok = "stopped", True
        tty = self.out.isatty()
        self.pipeline.start()
        try:
            while not self.stop_event.is_set():
                if self.duration is not None and time.monotonic() - started >= self.duration:
                    reason = "duration reached"
                    break
                try:
                    snap, events = self._queue.get(timeout=0.2)
                except queue.Empty:
                    continue
                writer.add_sample(snap, events)
                if self.on_snapshot is not None:
                    self.on_snapshot(snap)
                size = writer.size()
                self._status(writer, size, tty)
                if self.max_size is not None and size >= self.max_size:
                    reason = f"--max-size {self.max_size} bytes reached"
                    break
        except RecordingError as exc:
            reason, ok = str(exc), False
        finally:
            self.pipeline.stop()
            if ok and self.max_size is None:
                self._drain(writer)  # what was sampled before the stop is kept, however busy the host
            writer.close()
        if tty:
            self.out.write("\n")
        self.lost = getattr(writer, "lost", 0)  # `--dir`: dropped while the disk was full
        return Result(writer.samples, reason, ok)

    def _drain(self, writer: Any) -> None:
        """Write the samples still queued when the recording stopped (the sampler thread
        has stopped: nothing more arrives)."""
        try:
            while True:
                snap, events = self._queue.get_nowait()
                writer.add_sample(snap, events)
                if self.on_snapshot is not None:
                    self.on_snapshot(snap)
        except queue.Empty:
            pass
        except RecordingError:
            pass  # the disk filled or the file went while stopping: what is left cannot be kept

    def _status(self, writer: Writer, size: int, tty: bool) -> None:
        line = f"nettop: recording {writer.path}: {writer.samples} samples, {size / 1e6:.1f} MB"
        if tty:
            self.out.write("\r" + line + "\x1b[K")
            self.out.flush()
        elif self.rotation is None and (writer.samples == 1 or writer.samples % 60 == 0):  # --dir: a line a file
            self.out.write(line + "\n")
            self.out.flush()


def record(path: str, root: Any = None, ifnames: Iterable[str] | None = None, interval: float = 1.0,
           duration: float | None = None, max_size: int | None = None, prober: Any = None,
           journal: str | None = None, latency_target_ms: float | None = None, rotation: Any = None) -> int:
    """`nettop --record FILE` (`rotation`: `record --dir`): returns the exit status; every failure is one line on stderr."""
    from nettop.collectors.host import HostReader
    from nettop.kernel.sysroot import LIVE

    root = root or LIVE
    if journal is None:
        from nettop.actions.journal import default_path
        journal = default_path()
    if prober is not None:
        prober.start()
    if not root.live and rotation is None:
        from nettop.capture.archive import is_static
        if is_static(root.path):
            return _record_capture(path, root, ifnames, latency_target_ms)
    reader = HostReader(root, ifnames, prober=prober)
    meta = {"host": reader.host, "kernel": reader.kernel, "cpu_nodes": _cpu_nodes(root),
            "started": time.time(), "root": root.path if hasattr(root, "path") else "/"}
    if not root.live:
        from nettop.pipeline.tap import capture_meta
        meta.update(capture_meta(root.path))
    rec = Recorder(reader, path, interval, duration, max_size, meta, journal, latency_target_ms=latency_target_ms,
                   rotation=rotation)
    old = {s: signal.signal(s, rec.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    if rotation is not None:
        old[signal.SIGHUP] = signal.signal(signal.SIGHUP, rec.request_rotate)
    try:
        result = rec.run()
    except RecordingError as exc:
        print(f"nettop: {exc}", file=sys.stderr)
        return 1
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        reader.close()
        if prober is not None:
            prober.stop()
    msg = f"nettop: {result.reason}; {result.samples} samples in {path}"
    if rec.lost:
        msg += f" ({rec.lost} lost while nothing could be written)"
    print(msg, file=sys.stdout if result.ok else sys.stderr)
    return 0 if result.ok else 1


def _record_capture(path: str, root: Any, ifnames: Iterable[str] | None,
                    latency_target_ms: float | None) -> int:
    """A capture that cannot change (an archive, a sosreport) is recorded as its two
    points, the host at boot and the capture (or its two captures), at the capture's own
    times: sampling it every second would record rates of 0 at the reading's times."""
    from nettop.output.captured import NONE, CaptureError, expand, pair, read_capture
    from nettop.pipeline.tap import capture_meta

    try:
        p = pair([read_capture(r, ifnames) for r in expand([root])])
    except (CaptureError, OSError) as exc:
        print(f"nettop: {exc}", file=sys.stderr)
        return 1
    if p.basis == NONE:
        print(f"nettop: nothing to record: {p.note}", file=sys.stderr)
        return 1
    meta: dict[str, Any] = {"host": p.cur.host, "kernel": p.cur.kernel, "cpu_nodes": _cpu_nodes(root),
                            "started": time.time(), "root": root.path, "capture_note": p.note,
                            "interval_s": p.cur.t_mono - p.prev.t_mono, **capture_meta(root.path)}
    if latency_target_ms is not None:
        meta["latency_target_ms"] = latency_target_ms
    from nettop.doctor import DoctorConfig
    from nettop.doctor.watch import Watch
    from nettop.model.rates import compute_rates

    # the doctor's findings as a live recording holds them, judged over the whole interval
    watch = Watch(DoctorConfig(latency_target_ms=latency_target_ms,
                               window_s=p.cur.t_mono - p.prev.t_mono + 1.0))
    watch.observe(Point(p.prev, None))
    found = watch.observe(Point(p.cur, compute_rates(p.prev, p.cur)))
    try:
        writer = Writer(path, meta)
        try:
            writer.add_sample(p.prev, [Event(p.prev.t_wall, "problem", p.note)])
            writer.add_sample(p.cur, found)
        finally:
            writer.close()
    except RecordingError as exc:
        print(f"nettop: {exc}", file=sys.stderr)
        return 1
    print(f"nettop: {p.note}; 2 samples in {path}")
    return 0


def _cpu_nodes(root: Any) -> dict[str, int]:
    """CPU id -> NUMA node, for the replayed CPU panel's node filter (JSON keys are strings)."""
    from nettop.collectors.cpus import read_cpu_nodes

    return {str(cpu): node for cpu, node in read_cpu_nodes(root).items()}


class LiveRecording:
    """Recording what a live screen shows (the TUI's record key): call `add` per sample.

    Made to be called from the live source's sampler thread with each snapshot and the
    Timeline events that came with it; a write failure stops it and leaves `error` set
    (one line) instead of raising into the sampler."""

    def __init__(self, path: str, meta: dict[str, Any] | None = None, journal: str | None = None) -> None:
        self.writer = Writer(path, meta)
        self.journal = JournalTail(journal)
        self.error: str | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.error is None and self.writer is not None

    def add(self, snap: Snapshot, events: Iterable[Event] = ()) -> None:
        with self._lock:
            if not self.active:
                return
            try:
                self.writer.add_sample(snap, [*events, *self.journal.poll()])
            except RecordingError as exc:
                self.error = str(exc)

    def stop(self) -> int:
        """Close the file; the number of samples written."""
        with self._lock:
            self.writer.close()
            return self.writer.samples


def open_live_recording(path: str, meta: dict[str, Any]) -> LiveRecording:
    """How the live view's record key opens its file: new tuning journal entries ride
    along (the opener of `nettop.pipeline.RecordingTap`)."""
    from nettop.actions.journal import default_path

    return LiveRecording(path, meta, journal=default_path())
