"""What a front end is handed: the `Source` protocol, and the `Mailbox` between threads.

The live view is handed a source (the live pipeline, a recording's `ReplaySource`, or a
test's scripted source) and never reads the kernel itself. A source produces `Point`s on
its own thread and puts each into a `Mailbox` that keeps only the newest one, then wakes
the UI at most once until the UI has taken it: a slow frame never delays sampling and a
burst of samples never queues up frames. The mode string shown in the header comes from
the source.

Every part a front end may use is in the protocol; what only some sources have is typed
`X | None` (a replay has no recording tap, no eBPF switch and no live doctor), so no
caller has to probe with getattr.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Mapping, Protocol

from nettop.model.timeline import Event, Point, Timeline

if TYPE_CHECKING:
    from nettop.collectors.session_path import SessionPath
    from nettop.doctor import DoctorConfig, Finding
    from nettop.doctor.watch import Watch
    from nettop.ebpf.switch import ProbeSwitch
    from nettop.pipeline.tap import RecordingTap
    from nettop.ping.prober import Prober

Wake = Callable[[], None]


class Playback(Protocol):
    """What only a recording can do: its place, its speed, and moving through it."""

    speed: float  # 1 = as recorded
    of_capture: bool  # a recording of a captured tree: never shown as if live
    captured_at: float | None  # that capture's time, when known

    @property
    def path(self) -> str: ...  # the file or `record --dir` directory
    @property
    def warnings(self) -> list[str]: ...  # what could not be read, one line each
    @property
    def position(self) -> int: ...  # the sample shown, from 0
    @property
    def length(self) -> int: ...  # samples in the recording
    @property
    def at_end(self) -> bool: ...

    def step(self, n: int = 1) -> Point | None: ...
    def seek(self, t_wall: float) -> Point | None: ...
    def next_event(self, direction: int = 1, kinds: tuple[str, ...] | None = None) -> Event | None: ...


class Source(Protocol):
    @property
    def mode(self) -> str: ...  # "live", "replay" or "read-only"
    @property
    def is_root(self) -> bool: ...  # tuning is offered only when true
    @property
    def timeline(self) -> Timeline: ...  # a replay's seek replaces it: read it each time
    @property
    def cpu_nodes(self) -> Mapping[int, int]: ...  # CPU id -> NUMA node, empty when unknown
    @property
    def tap(self) -> RecordingTap | None: ...  # the record key; None: this source cannot record
    @property
    def probe_switch(self) -> ProbeSwitch | None: ...  # the eBPF key; None: no probes to turn on
    @property
    def doctor(self) -> Watch | None: ...  # live findings and verdicts; None: no live doctor
    @property
    def doctor_config(self) -> DoctorConfig: ...  # what findings are judged against
    @property
    def prober(self) -> Prober | None: ...  # the latency prober whose results ride in snapshots
    @property
    def captured_at(self) -> float | None: ...  # a captured tree's capture time; None: live or unknown
    @property
    def capture_note(self) -> str | None: ...  # what a static capture's figures are (since boot, between)

    @property
    def interval(self) -> float: ...
    @interval.setter
    def interval(self, seconds: float) -> None: ...
    @property
    def paused(self) -> bool: ...
    @paused.setter
    def paused(self, value: bool) -> None: ...

    def route_ifindexes(self) -> tuple[int, ...]: ...  # the default route's interfaces, first first
    # on screen: their settings read every tick; with `queues`, only those of the queue
    # rows drawn (kind as in the queue map, index; by interface), the rest in rotation
    def show_settings(self, ifnames: Iterable[str],
                      queues: Mapping[str, Collection[tuple[str, int]]] | None = None) -> None: ...
    def session(self) -> SessionPath | None: ...  # the SSH session's path; None: console or replay
    def playback(self) -> Playback | None: ...  # a recording's controls; None: a live source
    def start(self, wake: Wake) -> None: ...
    def take(self) -> Point | None: ...
    def stop(self) -> None: ...
    def own_cpu_percent(self) -> float | None: ...
    # the doctor's findings at the newest point, judged on the thread that made the point
    # (the sampler's Watch, a replay's playback thread)
    def findings(self) -> list[Finding]: ...


class Mailbox:
    """Holds the newest point; `put` says whether the consumer must be woken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._point: Point | None = None
        self._wake_pending = False
        self.superseded = 0  # points replaced before the UI took them

    def put(self, point: Point) -> bool:
        with self._lock:
            if self._point is not None:
                self.superseded += 1
            self._point = point
            if self._wake_pending:
                return False
            self._wake_pending = True
            return True

    def take(self) -> Point | None:
        with self._lock:
            point, self._point = self._point, None
            self._wake_pending = False
            return point


__all__ = ["Mailbox", "Playback", "Source", "Wake"]
