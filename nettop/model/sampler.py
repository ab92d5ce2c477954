"""The sampler: one thread, one monotonic clock, one snapshot per tick.

Ticks are scheduled on a fixed grid of monotonic deadlines, so a slow read does not
shift every later tick; a tick that is missed entirely (the host stalled, the process
was stopped) is skipped instead of being made up in a burst. Consumers get each
snapshot through a callback on the sampler thread and must only hand it on (the UI
keeps the latest one; the recorder queues it) — they never slow the clock down.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Protocol

from nettop.model.snapshot import Snapshot

MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 60.0


class Reader(Protocol):
    def read(self) -> Snapshot: ...


def clamp_interval(seconds: float) -> float:
    """The sampling interval nettop supports: 0.1 to 60 s."""
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise ValueError(
            f"interval {seconds:g} s is out of range: use {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} s"
        )
    return float(seconds)


class Sampler:
    """Reads `reader` every `interval` seconds on its own thread."""

    def __init__(self, reader: Reader, interval: float,
                 on_sample: Callable[[Snapshot], None],
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        self._reader = reader
        self._interval = clamp_interval(interval)
        self._on_sample = on_sample
        self._on_error = on_error
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._paused = False
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        return self._interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._interval = clamp_interval(seconds)
        self._wake.set()  # restart the grid from now

    @property
    def paused(self) -> bool:
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused = value
        self._wake.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="nettop-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._wake.clear()
            if not self._paused:
                self._tick()
            interval = self._interval
            next_at += interval
            now = time.monotonic()
            if next_at <= now:  # missed whole ticks: skip them, never burst
                next_at += math.ceil((now - next_at) / interval) * interval
                if next_at <= now:
                    next_at += interval
            if self._wake.wait(next_at - now):
                # interval changed, pause toggled or stopping: start a new grid now
                next_at = time.monotonic()

    def _tick(self) -> None:
        try:
            snap = self._reader.read()
        except Exception as exc:  # noqa: BLE001 - a reader bug must not kill sampling
            if self._on_error:
                self._on_error(exc)
            return
        self._on_sample(snap)
