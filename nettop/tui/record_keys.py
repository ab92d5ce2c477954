"""The record key of the live view: the source's own thread writes each sample; the app
only starts and stops the tap, asks for the path, and shows "● REC" or why it stopped."""

from __future__ import annotations

import time
from nettop.pipeline import RecordStatus, recording_meta
from nettop.tui import playback
from nettop.tui.drawing import DrawingMixin
from nettop.tui.screens import Prompt


class RecordKeysMixin(DrawingMixin):
    """Offered only on a live source with a tap (see `check_action`)."""

    recorded: list[RecordStatus]

    def action_record(self) -> None:
        tap = self.source.tap
        if tap is None:
            return
        if tap.active:
            status = self._stop_recording()
            if status is not None:
                self.notify(f"recorded {status.samples} samples to {status.path} "
                            f"({playback.size_text(status.size)})", timeout=5)
            self._draw_header()
            return
        host = self.latest.snapshot.host if self.latest is not None else "host"
        default = playback.default_record_path(host, time.time())
        self.push_screen(Prompt("Record what the screen shows to (enter starts, R again stops, escape cancels):",
                                default, id="record-path"), self._start_recording)

    def _start_recording(self, path: str | None) -> None:
        from nettop.record.store import RecordingError

        src = self.source
        if not path or src.tap is None:
            return
        meta = recording_meta(self.latest.snapshot if self.latest else None, src.interval, src.cpu_nodes,
                              src.tap.root, src.doctor_config.latency_target_ms)
        try:
            src.tap.start(path, meta, src.timeline)
        except (RecordingError, OSError) as exc:
            self._recording_failed(str(exc), starting=True)
            return
        self.record_error = None
        self._draw_notice()
        self._draw_header()

    def _stop_recording(self) -> RecordStatus | None:
        tap = self.source.tap
        status = tap.stop() if tap is not None else None
        if status is not None:
            self.recorded.append(status)
        return status

    def _recording_failed(self, error: str, starting: bool = False) -> None:
        line = f"{'not recording' if starting else 'recording stopped'}: {error}"
        if line == self.record_error:
            return
        self.record_error = line
        tap = self.source.tap
        if tap is not None:
            tap.error = None  # shown once; the notice keeps it until the next start
            if not starting and tap.finished is not None:
                self.recorded.append(tap.finished)
        self.notify(line, severity="error", timeout=5)
        self._draw_notice()
        self._draw_header()
