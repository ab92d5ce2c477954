"""Where the app's points come from: the `Source` protocol and the live source.

The app is handed a source (live, scripted for tests, later a replay) and never reads
the kernel itself. A source produces `Point`s on its own thread and puts each into a
`Mailbox` that keeps only the newest one, then wakes the UI at most once until the UI
has taken it: a slow frame never delays sampling and a burst of samples never queues
up frames. The mode string shown in the header comes from the source.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, TypeVar

from nettop.collectors.cpus import read_cpu_nodes
from nettop.model.sampler import Reader
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.timeline import LIVE_WHOLE_POINTS, Event, Point, Timeline
from nettop.output.before_after import figures
from nettop.tui.ebpf_panel import ProbeSwitch
from nettop.tui.recording import RecordingTap

if TYPE_CHECKING:
    from nettop.model.sampler import Sampler

Wake = Callable[[], None]
ROUTES_EVERY_S = 30.0  # routes change rarely; the summary reads them at most this often


class Source(Protocol):
    mode: str  # "live", "replay" or "read-only"
    timeline: Timeline
    is_root: bool
    cpu_nodes: Mapping[int, int]  # CPU id -> NUMA node, empty when unknown

    @property
    def interval(self) -> float: ...
    @interval.setter
    def interval(self, seconds: float) -> None: ...
    @property
    def paused(self) -> bool: ...
    @paused.setter
    def paused(self, value: bool) -> None: ...

    def start(self, wake: Wake) -> None: ...
    def take(self) -> Point | None: ...
    def stop(self) -> None: ...
    def own_cpu_percent(self) -> float | None: ...


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


T = TypeVar("T")


def off_loop(fn: Callable[[], T]) -> T:
    """Run `fn` on a short-lived thread and return its result (or raise its error).

    pyroute2's synchronous API drives an asyncio loop of its own, which it cannot do on
    a thread where Textual's loop is already running; netlink sockets are therefore
    opened and closed off the UI thread (and used only by the sampler thread)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    t = threading.Thread(target=run, name="nettop-netlink-setup")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class LiveSource:
    """HostReader + Sampler + Timeline on the sampler's own thread."""

    def __init__(self, root: SysRoot = LIVE, ifnames: Iterable[str] | None = None,
                 interval: float = 1.0, max_points: int = 3600, reader: Reader | None = None,
                 prober: Any = None, latency_target_ms: float | None = None) -> None:
        self.root = root
        self.prober = prober  # nettop.ping.Prober: its results ride in each snapshot
        self._given_reader = reader  # else a HostReader is opened on start
        self.ifnames = list(ifnames) if ifnames else None
        self.is_root = os.geteuid() == 0
        self.mode = "live" if root.live and self.is_root else "read-only"
        self.timeline = Timeline(max_points=max_points, whole_points=LIVE_WHOLE_POINTS, digest=figures)
        self.cpu_nodes: Mapping[int, int] = read_cpu_nodes(root)
        self._interval = interval
        self._paused = False
        self._mailbox = Mailbox()
        self._sampler: Sampler | None = None
        self._reader: Reader | None = None
        self._wake: Wake | None = None
        self._process: Any = None  # psutil.Process, imported when first asked
        self._last_error: str | None = None
        self.tap = RecordingTap()  # the record key; written on the sampler thread
        from nettop.doctor import DoctorConfig
        from nettop.doctor.watch import Watch
        self.doctor = Watch(DoctorConfig(latency_target_ms=latency_target_ms))
        self.probe_switch = ProbeSwitch(self._attach_probes)  # the eBPF key
        self._routes: tuple[int, ...] = ()
        self._routes_t: float | None = None

    def route_ifindexes(self) -> tuple[int, ...]:
        """The interfaces of the default route (ifindexes, lowest metric first), asked of
        the kernel over rtnetlink at most every ROUTES_EVERY_S; none for a captured tree."""
        now = time.monotonic()
        if self.root.live and (self._routes_t is None or now - self._routes_t >= ROUTES_EVERY_S):
            from nettop.kernel.routes import read_default_ifindexes

            self._routes, self._routes_t = read_default_ifindexes(), now
        return self._routes

    def _attach_probes(self, probes: Any) -> None:
        """Hand running eBPF probes to the reader (None: take them away); the reader takes
        their counts on its next tick."""
        if self._reader is not None and hasattr(self._reader, "probes"):
            self._reader.probes = probes

    @property
    def interval(self) -> float:
        return self._interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._interval = seconds
        if self._sampler is not None:
            self._sampler.interval = seconds

    @property
    def paused(self) -> bool:
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused = value
        if self._sampler is not None:
            self._sampler.paused = value

    def start(self, wake: Wake) -> None:
        from nettop.model.sampler import Sampler

        self._wake = wake
        if self._given_reader is None:
            from nettop.collectors.host import HostReader

            if self.prober is not None:
                self.prober.start()
            self._reader = off_loop(lambda: HostReader(self.root, self.ifnames, prober=self.prober))
        else:
            self._reader = self._given_reader
        sampler = self._sampler = Sampler(self._reader, self._interval, self._on_sample, self._on_error)
        sampler.paused = self._paused
        sampler.start()

    def _on_sample(self, snap) -> None:  # type: ignore[no-untyped-def]
        point = self.timeline.append(snap)
        self.doctor.observe(point, self.timeline)  # findings panel (7) and chart markers
        if self._mailbox.put(point) and self._wake is not None:
            self._wake()
        self.tap.feed(snap, self.timeline)

    def _on_error(self, exc: BaseException) -> None:
        text = f"sampler: {exc}"
        if text != self._last_error:  # a failure that repeats every tick is one marker
            self._last_error = text
            self.timeline.add_event(Event(time.time(), "problem", text))

    def take(self) -> Point | None:
        return self._mailbox.take()

    def stop(self) -> None:
        self.probe_switch.stop()
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self.tap.stop()
        if self._reader is not None:
            close = getattr(self._reader, "close", None)  # the HostReader we opened
            if self._reader is not self._given_reader and close is not None:
                off_loop(close)
            self._reader = None
        if self.prober is not None:
            self.prober.stop()

    def own_cpu_percent(self) -> float | None:
        """CPU % of the whole process (sampler thread + UI) since the previous call."""
        if self._process is None:
            import psutil

            self._process = psutil.Process()
            self._process.cpu_percent(None)
            return None
        return self._process.cpu_percent(None)
